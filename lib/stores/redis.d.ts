// Types of toolgate/redis. The clients are typed by the little the store uses of them, so that neither ioredis nor
// node-redis types are needed (nor either package): any of their clients fits.

type Listener = (...args: any[]) => void

/** An ioredis client: `new Redis(…)` or `new Redis.Cluster(…)`. */
export interface IORedisClientLike {
  readonly status: string
  call(command: string, ...args: string[]): Promise<unknown>
  on(event: string | symbol, listener: Listener): unknown
  readonly isCluster?: boolean
  /** A cluster's node clients (the store scans its masters to invalidate). */
  nodes?(role: 'master'): Array<{ call(command: string, ...args: string[]): Promise<unknown> }>
  readonly options?: { readonly keyPrefix?: string }
}

/** A node-redis client: `createClient(…)`, connected. */
export interface NodeRedisClientLike {
  readonly isReady: boolean
  readonly isOpen?: boolean
  sendCommand(args: string[]): Promise<unknown>
  on(event: string | symbol, listener: Listener): unknown
}

/** A node-redis cluster: `createCluster(…)`, connected. */
export interface NodeRedisClusterLike {
  readonly isReady: boolean
  readonly isOpen?: boolean
  readonly masters: ReadonlyArray<any>
  nodeClient(node: any): Promise<{ sendCommand(args: string[]): Promise<unknown> }>
  sendCommand(firstKey: string | undefined, isReadonly: boolean | undefined, args: string[]): Promise<unknown>
  on(event: string | symbol, listener: Listener): unknown
}

export type RedisClientLike = IORedisClientLike | NodeRedisClientLike | NodeRedisClusterLike

/** The stations that use the store. */
export type StoreStation = 'cache' | 'dedup' | 'rateLimit' | 'sessions' | 'budget' | 'breaker'
/** When Redis fails: 'open' lets the call go on as if the station had nothing to say, 'closed' fails it. */
export type StoreFailureMode = 'open' | 'closed'

export interface RedisStoreOptions {
  /** The app's own client, connected (ioredis or node-redis, one node or a cluster). */
  client: RedisClientLike
  /** Put before every key; no '{' or '}' (default 'toolgate:'). */
  prefix?: string
  /** How long a call waits on one round trip to Redis before the store counts as unavailable for it, in ms (default 50). */
  timeoutMs?: number
  /** One mode for every station, or by station (default cache, dedup, sessions and breaker 'open', rateLimit and
   * budget 'closed'). */
  onError?: StoreFailureMode | Partial<Record<StoreStation, StoreFailureMode>>
  /** A result larger than this (UTF-8 bytes) is not cached nor kept (default 1 MiB). */
  maxEntryBytes?: number
  /** The fields a session holds at most; past it, new dedup keys and kept results are not recorded (default 10,000). */
  maxSessionKeys?: number
  /** Operations waiting on Redis at most; past it (a server that stopped answering), new ones fail at once (default 10,000). */
  maxInFlight?: number
}

/** The operations the engine sends the store. */
export type StoreOp =
  | { op: 'count'; session: string; key?: string; ttlMs: number; refuse: boolean; reuse: boolean; rollbacks: boolean }
  | { op: 'remembered'; session: string; field: string }
  | { op: 'lookup'; key: string; owner?: string; leaseMs?: number }
  | { op: 'take'; key: string; capacity: number; refillPerSec: number; maxWaitMs: number }
  | { op: 'refund'; key: string; capacity: number }
  | { op: 'put'; key: string; value: string; ttlMs: number; owner?: string }
  | { op: 'release'; key: string; owner: string }
  | { op: 'uncount'; session: string; key: string }
  | { op: 'keep'; session: string; key: string; value: string; ttlMs: number }
  | { op: 'remember'; session: string; field: string; ttlMs: number }
  | { op: 'rollbacks'; session: string; flagged: boolean; ttlMs: number }
  | { op: 'spend'; key: string; amount: number; limit: number; ttlMs: number; windowMs?: number }
  | { op: 'unspend'; key: string; amount: number; window: number }
  | { op: 'breakerAdmit'; key: string; halfOpenCalls: number; trialWaitMs: number; ttlMs: number; openMs: number }
  | {
      op: 'breakerRecord'; key: string; admission: 'counted' | 'trial'; generation: number
      outcome: 'success' | 'failure' | 'untested'; failureRate: number; minCalls: number; windowMs: number
      openMs: number; halfOpenCalls: number; ttlMs: number
    }

/** One reply per operation; a failed one is `{ error }`. */
export type StoreReply =
  | { earlier: number; reused: string | null; rollbacks: number | null }
  | { remembered: boolean }
  | { value: string }
  | { value: null; lease?: 'taken' }
  | { value: null; lease: 'held'; leaseLeftMs: number }
  | { take: 'now' }
  | { take: 'after' | 'refused'; waitMs: number }
  | { skipped?: true }
  | { spent: 'ok'; used: number; window: number }
  | { spent: 'over'; used: number; waitMs?: number }
  | { admit: 'counted' | 'trial' | 'refused'; waitMs: number; phase: BreakerPhase; generation: number; from?: BreakerPhase }
  | { phase: BreakerPhase; from?: BreakerPhase; calls?: number; failures?: number; waitMs: number }
  | { error: string }

export type BreakerPhase = 'closed' | 'open' | 'half_open'

export interface RedisStore {
  readonly kind: 'redis'
  readonly prefix: string
  readonly timeoutMs: number
  readonly maxEntryBytes: number
  readonly onError: Readonly<Record<StoreStation, StoreFailureMode>>
  /** Runs a batch of operations at once; never rejects: one reply per op, in order, each also told to `onReply` as
   * its node answers. */
  run(ops: ReadonlyArray<StoreOp>, onReply?: (index: number, reply: StoreReply) => void): Promise<StoreReply[]>
  /** Deletes the cached entries whose cache key starts with `prefix` ('' for all) and resolves to how many; rejects
   * when Redis failed on the way (the cache may then be partly invalidated). */
  invalidate(prefix: string): Promise<number>
}

/** The Redis store for `new ToolExecutor({ store })`. Throws a TypeError for bad options or a foreign client. */
export declare function redisStore(options: RedisStoreOptions): RedisStore
