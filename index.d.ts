// Types of the toolgate package entry (index.js). The native layer's generated types (binding.d.ts) are the repository's, not the package's.

// Only what is marked `export` is public: the schema helpers below stay private.
export {}

/** The names JSON Schema's `type` keyword takes. */
export type JsonSchemaType = 'string' | 'number' | 'integer' | 'boolean' | 'object' | 'array' | 'null'

/** A JSON value as a schema states it (`enum`, `const`, `default`, `examples`); `as const` makes its lists readonly. */
type JsonSchemaValue = string | number | boolean | null | readonly JsonSchemaValue[] | { readonly [key: string]: JsonSchemaValue }
type Subschema = JsonSchema | boolean
type Subschemas = { readonly [name: string]: Subschema }

/**
 * A JSON Schema (2020-12, with draft-07's `definitions`, array `items` and `additionalItems`). Its keywords are
 * typed; any other key (`x-…`, vendor keywords) is allowed, as JSON Schema ignores it. Lists may be readonly, so
 * a schema written `as const` is one.
 */
export interface JsonSchema {
  $schema?: string
  $id?: string
  $ref?: string
  $anchor?: string
  $dynamicRef?: string
  $dynamicAnchor?: string
  $comment?: string
  $defs?: Subschemas
  definitions?: Subschemas
  title?: string
  description?: string
  default?: JsonSchemaValue
  examples?: readonly JsonSchemaValue[]
  deprecated?: boolean
  readOnly?: boolean
  writeOnly?: boolean
  type?: JsonSchemaType | readonly JsonSchemaType[]
  enum?: readonly JsonSchemaValue[]
  const?: JsonSchemaValue
  allOf?: readonly Subschema[]
  anyOf?: readonly Subschema[]
  oneOf?: readonly Subschema[]
  not?: Subschema
  if?: Subschema
  then?: Subschema
  else?: Subschema
  multipleOf?: number
  minimum?: number
  maximum?: number
  exclusiveMinimum?: number
  exclusiveMaximum?: number
  minLength?: number
  maxLength?: number
  pattern?: string
  format?: string
  contentEncoding?: string
  contentMediaType?: string
  contentSchema?: Subschema
  /** A schema for every item, or (draft-07) a tuple's: `prefixItems` in 2020-12. */
  items?: Subschema | readonly Subschema[]
  prefixItems?: readonly Subschema[]
  additionalItems?: Subschema
  unevaluatedItems?: Subschema
  contains?: Subschema
  minContains?: number
  maxContains?: number
  minItems?: number
  maxItems?: number
  uniqueItems?: boolean
  properties?: Subschemas
  patternProperties?: Subschemas
  additionalProperties?: Subschema
  unevaluatedProperties?: Subschema
  propertyNames?: Subschema
  required?: readonly string[]
  minProperties?: number
  maxProperties?: number
  dependentRequired?: { readonly [name: string]: readonly string[] }
  dependentSchemas?: Subschemas
  dependencies?: { readonly [name: string]: Subschema | readonly string[] }
  /** OpenAPI's, not JSON Schema's: validation ignores it, so it would not let a null through. Write
   * `type: ['string', 'null']`. */
  nullable?: never
  /** A Standard Schema without `~standard.jsonSchema` (such as a bare valibot schema) has no JSON Schema to give:
   * wrap it (valibot: `toStandardJsonSchema` of `@valibot/to-json-schema`). */
  '~standard'?: never
  [keyword: string]: unknown
}
/** `T` as `JSON.parse` gives it: mutable lists, which SDK types (Anthropic's `input_schema`, JSONSchema7) require. */
type Parsed<T> = T extends readonly (infer E)[] ? Parsed<E>[] : T extends object ? { -readonly [K in keyof T]: Parsed<T[K]> } : T
/** A registered tool's schema: always says `type: 'object'` (added at registration when only implied). */
export interface ObjectJsonSchema extends Parsed<JsonSchema> {
  type: 'object'
}

/** The Standard Typed interface of Standard Schema 1.1.0 (https://standardschema.dev), copied as the spec
 * suggests so that these types depend on no package. */
export interface StandardTypedV1<Input = unknown, Output = Input> {
  readonly '~standard': StandardTypedV1.Props<Input, Output>
}
export declare namespace StandardTypedV1 {
  interface Props<Input = unknown, Output = Input> {
    readonly version: 1
    readonly vendor: string
    readonly types?: Types<Input, Output> | undefined
  }
  interface Types<Input = unknown, Output = Input> {
    readonly input: Input
    readonly output: Output
  }
}
/** Standard Schema 1.1.0: a value that validates. */
export interface StandardSchemaV1<Input = unknown, Output = Input> {
  readonly '~standard': StandardSchemaV1.Props<Input, Output>
}
export declare namespace StandardSchemaV1 {
  interface Props<Input = unknown, Output = Input> extends StandardTypedV1.Props<Input, Output> {
    readonly validate: (value: unknown, options?: Options | undefined) => Result<Output> | Promise<Result<Output>>
  }
  type Result<Output> = SuccessResult<Output> | FailureResult
  interface SuccessResult<Output> {
    readonly value: Output
    readonly issues?: undefined
  }
  interface FailureResult {
    readonly issues: ReadonlyArray<Issue>
  }
  interface Issue {
    readonly message: string
    readonly path?: ReadonlyArray<PropertyKey | PathSegment> | undefined
  }
  interface PathSegment {
    readonly key: PropertyKey
  }
  interface Options {
    readonly libraryOptions?: Record<string, unknown> | undefined
  }
}
/** Standard JSON Schema 1.1.0: a value that gives its JSON Schema. */
export interface StandardJSONSchemaV1<Input = unknown, Output = Input> {
  readonly '~standard': StandardJSONSchemaV1.Props<Input, Output>
}
export declare namespace StandardJSONSchemaV1 {
  interface Props<Input = unknown, Output = Input> extends StandardTypedV1.Props<Input, Output> {
    readonly jsonSchema: Converter
  }
  interface Converter {
    readonly input: (options: Options) => Record<string, unknown>
    readonly output: (options: Options) => Record<string, unknown>
  }
  type Target = 'draft-2020-12' | 'draft-07' | 'openapi-3.0' | ({} & string)
  interface Options {
    readonly target: Target
    readonly libraryOptions?: Record<string, unknown> | undefined
  }
}
export type InferInput<S extends StandardTypedV1> = NonNullable<S['~standard']['types']>['input']
export type InferOutput<S extends StandardTypedV1> = NonNullable<S['~standard']['types']>['output']

/** zod 4 before 4.2, and zod/mini, lack `~standard.jsonSchema` in their types, but toolgate takes them. */
interface Zod4Schema extends StandardSchemaV1 {
  readonly _zod: { readonly version: { readonly major: 4 } }
}
/**
 * What `parameters` and `outputSchema` take: a JSON Schema, a Standard JSON Schema (zod 4.2+, ArkType 2, valibot
 * through `toStandardJsonSchema`), or a zod 4 schema.
 */
export type ToolSchema = JsonSchema | StandardJSONSchemaV1 | Zod4Schema

/**
 * The type of the values a JSON Schema accepts, for a schema whose type is its literal (written `as const`, or
 * inline in `register`). Read: `type`, `properties`, `required`, `additionalProperties`, `items`, `prefixItems`,
 * `minItems`, `enum`, `const`, `anyOf`, `oneOf`, `allOf`. The other keywords narrow nothing here (`$ref`, `not`,
 * `if`, `patternProperties`…): a schema made only of them is `unknown`.
 */
export type FromSchema<S> =
  S extends true ? unknown
  : S extends false ? never
  : S extends { readonly const: infer C } ? C
  : S extends { readonly enum: readonly (infer E)[] } ? E
  : FromTypeKeywords<S> & FromCombinators<S>

type FromTypeKeywords<S> =
  S extends { readonly type: infer T } ? FromTypeName<S, T extends readonly (infer N)[] ? N : T>
  : S extends { readonly properties: object } | { readonly required: readonly string[] } ? FromObject<S>
  : unknown
interface PrimitiveTypes {
  string: string
  number: number
  integer: number
  boolean: boolean
  null: null
}
type FromTypeName<S, N> =
  N extends keyof PrimitiveTypes ? PrimitiveTypes[N]
  : N extends 'object' ? FromObject<S>
  : N extends 'array' ? FromArray<S>
  : never

type FromCombinators<S> =
  (S extends { readonly anyOf: readonly (infer M)[] } ? FromSchema<M> : unknown)
  & (S extends { readonly oneOf: readonly (infer M)[] } ? FromSchema<M> : unknown)
  & (S extends { readonly allOf: infer A } ? FromAllOf<A> : unknown)
type FromAllOf<A> = A extends readonly [infer H, ...infer T] ? FromSchema<H> & FromAllOf<T> : unknown

type FromObject<S> = ObjectOf<
  S,
  S extends { readonly properties: infer P } ? P : {},
  // A `required` typed only as string[] names no key for certain.
  S extends { readonly required: readonly (infer K extends string)[] } ? (string extends K ? never : K) : never
>
/**
 * Without `additionalProperties`, only the declared properties: TypeScript object types are open anyway, and an
 * index signature would let misspelt keys through as `unknown`. Beside declared properties an index signature can
 * only be `unknown`, since TypeScript holds them to it too.
 */
type ObjectOf<S, P, R extends string> =
  [keyof P | R] extends [never] ? Record<string, S extends { readonly additionalProperties: infer A } ? FromSchema<A> : unknown>
  : Simplify<
      { [K in keyof P & R]: FromSchema<P[K]> }
      & { [K in Exclude<keyof P, R>]?: FromSchema<P[K]> }
      & { [K in Exclude<R, keyof P>]: unknown }
      & (S extends { readonly additionalProperties: true | object } ? { [key: string]: unknown } : {})
    >
/** `& {}` makes editors show the merged object rather than this alias. */
type Simplify<T> = { [K in keyof T]: T[K] } & {}

type FromArray<S> =
  S extends { readonly prefixItems: infer P extends readonly unknown[] } ? TupleOf<P, MinItems<S>, ItemsAfter<S, 'items'>>
  : S extends { readonly items: infer P extends readonly unknown[] } ? TupleOf<P, MinItems<S>, ItemsAfter<S, 'additionalItems'>>
  : ItemsAfter<S, 'items'>
type MinItems<S> = S extends { readonly minItems: infer N extends number } ? N : 0
type ItemsAfter<S, K extends string> = S extends { readonly [_ in K]: infer I } ? (I extends false ? [] : FromSchema<I>[]) : unknown[]
/** A tuple's items are optional past `minItems`, as JSON Schema does not require them. */
type TupleOf<P extends readonly unknown[], Min, Rest extends unknown[], Out extends unknown[] = []> =
  P extends readonly [infer H, ...infer T]
    ? Out['length'] extends Min
      ? [...Out, ...{ [K in keyof P]?: FromSchema<P[K]> }, ...Rest]
      : TupleOf<T, Min, Rest, [...Out, FromSchema<H>]>
    : [...Out, ...Rest]

/**
 * What a handler (and `check`) receives for `parameters: P`: a Standard Schema's output (its `validate` runs after
 * the engine's validation), or its input when it has no `validate`; the type of a JSON Schema literal;
 * `Record<string, unknown>` for a schema typed only as `JsonSchema`, or none.
 */
export type ToolArgs<P> =
  0 extends 1 & P ? Record<string, unknown>
  : JsonSchema extends P ? Record<string, unknown>
  : P extends StandardSchemaV1 ? InferOutput<P>
  : P extends StandardTypedV1 ? InferInput<P>
  : ObjectArgs<FromSchema<P>>
/** The engine hands a handler an object whatever the schema says. */
type ObjectArgs<T> = unknown extends T ? Record<string, unknown> : T
/** What a handler must return for `outputSchema: O`: what the schema takes in; anything without one. */
export type ToolReturn<O> =
  0 extends 1 & O ? unknown
  : [O] extends [undefined] ? unknown
  : JsonSchema extends O ? unknown
  : O extends StandardTypedV1 ? InferInput<O>
  : FromSchema<O>

/** Why a call failed. Each kind tells a model something different about what to do next. */
export type ErrorKind =
  /** The call named a tool that does not exist (or is not available here); the error lists the ones that do. */
  | 'unknown_tool'
  /** The arguments were not a JSON object or did not match the schema; the error lists every problem by path. */
  | 'invalid_arguments'
  /** The tool may not be used in this context. Do not retry. */
  | 'permission_denied'
  /** The tool needs approval and this call did not have it. */
  | 'approval_denied'
  /** Too many calls; retry after `retryAfterMs`. */
  | 'rate_limited'
  /** The handler did not finish within its total time limit and was aborted. */
  | 'timeout'
  /** The handler reported no progress for too long and was aborted. */
  | 'idle_timeout'
  /** The turn was cancelled before or while the call ran. */
  | 'cancelled'
  /** A turn policy kept the call from running. */
  | 'not_executed'
  /** The handler threw, rejected, or returned something that cannot be passed on. */
  | 'handler_error'
  /** The same query already ran in this session. */
  | 'duplicate'
  /** The tool is not being called for now: its circuit breaker is open after repeated failures (retry after
   * `retryAfterMs`, meanwhile do something else), or the shared store a station needs is down and that station
   * fails closed (`onError: 'closed'`). */
  | 'unavailable'
  /** A budget (calls per turn, per session, per window, or cost) would be passed: `metadata.budget` says which. Do
   * not call tools again under it; answer with what you have. */
  | 'budget_exceeded'

export declare const ERROR_KINDS: readonly ErrorKind[]
/** The format of the turns the executor records (`record` option); `loadRecording` of toolgate/testing reads it. */
export declare const RECORDING_VERSION: 1

/** What a handler receives besides its arguments. */
export interface ToolContext<Ctx = ExecutionContext> {
  /**
   * Aborted when the call times out (total or idle limit) or the turn is cancelled; pass it to fetch, child
   * processes, etc. Each attempt gets a fresh one.
   */
  signal: AbortSignal
  /** The call's id as the model sent it (or a generated one). */
  callId: string
  toolName: string
  /** The `context` given to `execute`, as is (the same object). */
  context: Ctx | undefined
  /** 1 for the first attempt, 2 for the first retry, … */
  attempt: number
  /**
   * Shows the handler is alive: restarts the tool's idle limit (`idleTimeoutMs`; the total `timeoutMs` still
   * holds) and passes `info` to the `onProgress` listeners.
   */
  progress(info?: unknown): void
}

/** A handler may return a value or a Promise of one, and may throw or reject with anything. */
export type ToolHandler<Args = Record<string, unknown>, Ctx = ExecutionContext, Return = unknown> = (
  args: Args,
  ctx: ToolContext<Ctx>,
) => Return | PromiseLike<Return>

/**
 * `off`: nothing; `note`: the result says how often the query already ran; `refuse`: a `duplicate` result;
 * `reuse`: the earlier successful result again, without running.
 */
export type DedupPolicy = 'off' | 'note' | 'refuse' | 'reuse'

/**
 * `'N/unit'` (unit: s, min, hour, day): a bucket of N tokens refilled continuously at N per unit, so a burst of N
 * then one every unit/N. `key`: a context field that gives each value its own bucket (per user or tenant).
 * `maxWaitMs`: how long a call may wait for a token, in arrival order (default 0: refused at once).
 */
export type RateLimitSpec =
  | `${number}/${'s' | 'sec' | 'second' | 'm' | 'min' | 'minute' | 'h' | 'hour' | 'd' | 'day'}`
  | { capacity: number; refillPerSecond: number; key?: string; maxWaitMs?: number }
  | { limit: string; key?: string; maxWaitMs?: number }

/**
 * Exponential backoff with full jitter: attempt n+1 waits a random time below
 * min(maxDelayMs, initialDelayMs × backoffFactor^(n-1)), or at least a failure's `retryAfterMs`.
 */
export interface RetryPolicy {
  /** Retries after the first attempt. Default 2. */
  maxRetries?: number
  /** Default 1000. */
  initialDelayMs?: number
  /** Default 2. */
  backoffFactor?: number
  /** Default 60 000. */
  maxDelayMs?: number
  /** No attempt starts later than this after the first one started. Default 120 000. */
  maxElapsedMs?: number
  /**
   * Retry a timeout or idle timeout of a read-only or idempotent tool. Default false: the call answers at its
   * limit. When true, a call may take up to (maxRetries + 1) × the limit, plus the backoffs.
   */
  onTimeout?: boolean
}

/**
 * `P` and `O`: the types of `parameters` and `outputSchema`, from which the handler's arguments and return type
 * follow (see `ToolArgs`, `ToolReturn`). `Args` replaces the arguments' type inferred from `P`.
 */
export interface ToolSpec<
  P extends ToolSchema = ToolSchema,
  Ctx = ExecutionContext,
  O extends ToolSchema | undefined = ToolSchema | undefined,
  Args = ToolArgs<P>,
> {
  /** 1–64 characters of a-z, A-Z, 0-9, `_` and `-` (what every provider accepts). */
  name: string
  description?: string
  /**
   * The arguments object's schema: its JSON Schema is compiled once at registration (one that does not compile
   * throws). A Standard Schema's refinements, transforms and defaults then run in JS, and the handler gets its output.
   */
  parameters?: P
  /** Validates the handler's structured return value; the handler's return type is checked against what the schema
   * takes in. */
  outputSchema?: O
  handler: ToolHandler<NoInfer<Args>, Ctx, NoInfer<ToolReturn<O>>>
  /** Only reads: consecutive read-only calls run concurrently; any other call runs alone. Default false. */
  readOnly?: boolean
  /** Running it twice with the same arguments has the same effect as once. Default false. */
  idempotent?: boolean
  /** Total time limit in ms (default: the executor's `defaultTimeoutMs`, never above its `maxTimeoutMs`). */
  timeoutMs?: number
  /** Longest silence, in ms, between `ctx.progress()` calls (and before the first) before the call is stopped. */
  idleTimeoutMs?: number
  /** Overrides of the executor's retry policy, field by field; `false`: never retry this tool. */
  retry?: RetryPolicy | false
  /** How many calls of this tool may run at once across the executor (on top of `concurrency`). */
  maxConcurrency?: number
  /**
   * For `idempotent` tools (cached by default for the executor's `cache.ttlMs`): how long a result stays fresh,
   * and a context field that splits the cache (per user or tenant). `false`: never cached.
   */
  cache?: { ttlMs?: number; scope?: string } | false
  /** What a repeated query in a session gets; `keys`: the arguments that make the query (default: all). */
  dedup?: DedupPolicy | { policy?: DedupPolicy; keys?: string[] }
  /** A token bucket for this tool. */
  rateLimit?: RateLimitSpec
  /** Longest output, in characters, the model reads (default: the executor's `maxOutputChars`); a longer one
   * is saved whole to an artifact and the model gets a preview. */
  maxOutputChars?: number
  /** It reads the outside world (web pages, email, uploads): its output is fenced as data, not instructions. */
  untrusted?: boolean
  /** Other names a model may use for a top-level property, e.g. `{ q: 'query' }` (applied in a call that fails
   * validation, like every repair). */
  aliases?: Record<string, string>
  /** When a successful result is useless (an empty list, an error page): it gets `rollback: { reason }`. */
  rollbackWhen?: RollbackRule | RollbackRule[] | ((value: unknown, ctx: { callId: string; toolName: string; context: Ctx | undefined }) => boolean | string | null | undefined)
  /** Every call asks the approval callback (unless the context lists the tool in `approvedTools`, or the mode is
   * `acceptAll`). */
  needsApproval?: boolean
  /** How much it can change (default: `read` for read-only tools, else `write`). */
  risk?: Risk
  /** The tool's own business check of the arguments, before permission: return nothing when fine, or the problem
   * (a string) to refuse the call as `invalid_arguments`. Throwing, or taking longer than `checkTimeoutMs`, fails it. */
  check?: (args: NoInfer<Args>, ctx: { callId: string; toolName: string; context: Ctx | undefined }) => unknown
  /** A path argument (a name, or a JSON pointer such as '/file/path') must resolve inside `root`. */
  pathWithin?: { arg: string; root: string } | { arg: string; root: string }[]
  /** A URL argument's host must be one of `hosts` (`*.example.com` for its subdomains). */
  urlHosts?: { arg: string; hosts: string[] } | { arg: string; hosts: string[] }[]
  /** Replace a tool already registered under this name instead of throwing. */
  replace?: boolean
  /** Where the tool comes from, shown by `list()` (a mounted MCP tool's server, its name there, its annotations). */
  origin?: ToolOrigin
  /** Stop calling the tool while its backend keeps failing (`true`: the defaults); `false`: off even when the
   * executor sets one. */
  breaker?: BreakerOptions | boolean
  /** Limits on this tool's calls (per turn, per session or other holder, per window, cost). */
  budget?: Budget
  /** What one call costs against cost budgets (`maxCost`): a number, or a function of the arguments (run only when
   * a cost budget applies; throwing, or not returning a number of at least 0, fails the call). Default 0. */
  cost?: number | ((args: NoInfer<Args>, ctx: { callId: string; toolName: string; context: Ctx | undefined }) => number | Promise<number>)
}

/**
 * A circuit breaker: closed, it counts how attempts end (handler errors and timeouts are failures; refusals,
 * invalid arguments and cancellations do not count); past `failureRate` of at least `minCalls` in `windowMs` it
 * opens, and calls get `unavailable` without running; after `openMs` it lets `halfOpenCalls` trial calls through,
 * whose successes close it and whose first failure opens it again.
 */
export interface BreakerOptions {
  /** Default 0.5. */
  failureRate?: number
  /** Default 10. */
  minCalls?: number
  /** Default 60 000. */
  windowMs?: number
  /** Default 30 000. */
  openMs?: number
  /** Default 1. */
  halfOpenCalls?: number
}

/**
 * Limits on calls that run (a cache hit or a refused call costs nothing), on the executor (all calls), a tool (its
 * calls) or the context (all calls of its holder). A call past one is refused before it runs (`budget_exceeded`).
 */
export interface Budget {
  /** Calls in one `execute`. */
  maxCallsPerTurn?: number
  /** Calls of the holder (a session unless `by` says otherwise), kept for the executor's `dedup.sessionTtlMs`
   * after the last one. */
  maxCalls?: number
  /** Calls of the holder in each window of `windowMs` (fixed windows of the store's clock). */
  maxCallsPerWindow?: { calls: number; windowMs: number }
  /** The most the holder's calls may cost together (each tool's `cost`). */
  maxCost?: number
  /** The context fields whose values name the holder. Default `'sessionId'`. */
  by?: string | string[]
}

/** A JSON object `list()` shows as given; no station reads it. `toolgate/mcp` fills `server`, `name`,
 * `title`, `annotations` and `trusted`. */
export interface ToolOrigin {
  /** The server (or other source) the tool comes from. */
  server?: string
  /** The tool's name there, when it differs. */
  name?: string
  title?: string
  annotations?: Record<string, unknown>
  trusted?: boolean
  [key: string]: unknown
}

/**
 * Returns `spec` as is: a tool declared apart from `register` keeps the types `register` would infer. `Ctx` follows
 * the handler's `ctx` annotation (a `ToolContext<AppContext>` tool registers on a `ToolExecutor<AppContext>`).
 */
export declare function defineTool<
  const P extends ToolSchema = ToolSchema,
  const O extends ToolSchema | undefined = ToolSchema | undefined,
  Ctx = ExecutionContext,
>(spec: ToolSpec<P, Ctx, O>): ToolSpec<P, Ctx, O>

export interface ExecutorOptions {
  /** Time limit for a tool that declares none. Default 30 000 ms. */
  defaultTimeoutMs?: number
  /** Cap on every tool's time limit. Default 600 000 ms. */
  maxTimeoutMs?: number
  /** How many read-only calls of one turn run at once. Default 8. */
  concurrency?: number
  /** Longest successful output, in characters, a model reads; a longer one is saved whole to an artifact and the
   * model gets its length, the path and a preview. Default 30 000. */
  maxOutputChars?: number
  /** Longest error text, in characters; longer ones keep head and tail. Default 10 000. */
  maxErrorChars?: number
  /** How much of a saved output the model sees. Default 2 000. */
  previewChars?: number
  /** Secret redaction in everything a call hands on (on by default, with the built-in rules); `false`: off. */
  redact?: RedactOptions | false
  /** Where outputs too long to show are saved, and for how long. */
  artifacts?: ArtifactOptions
  /** Which near-miss calls are repaired (all but tool names by default); `false`: none. */
  repair?: RepairOptions | false
  /** After this many consecutive `rollback` flags in a session, results are no longer flagged. Default 3. */
  maxConsecutiveRollbacks?: number
  /** Rules and a mode for every call (a context may add its own). */
  permissions?: Permissions
  /** Decides the calls a rule, a mode or `needsApproval` asks about. Without it, they are denied. */
  approve?: (request: ApprovalRequest) => ApprovalAnswer | Promise<ApprovalAnswer>
  /** How long `approve` may take before the call counts as denied. Default 60 000. */
  approvalTimeoutMs?: number
  /** How long a tool's `check`, or a schema's own validation of the arguments, may take before the call fails.
   * Default 10 000. */
  checkTimeoutMs?: number
  /** The retry policy of tools that declare none (default: 2 retries, ×2 from 1 s, capped at 60 s); `false`: none. */
  retry?: RetryPolicy | false
  /** The result cache of idempotent tools: least recently used out first. */
  cache?: { maxEntries?: number; maxBytes?: number; ttlMs?: number }
  /** Session dedup (sessions come from `context.sessionId`): the default policy and the memory bounds. */
  dedup?: { policy?: DedupPolicy; sessionTtlMs?: number; maxSessions?: number; maxQueriesPerSession?: number }
  /** One bucket every call shares, on top of each tool's own. */
  rateLimit?: RateLimitSpec
  /** Every `ctx.progress()` of every call. */
  onProgress?: (event: ProgressEvent) => void
  /** Trace events in batches: every station of every call, once per finished turn, and late settlements. */
  onTrace?: (events: TraceEvent[]) => void
  /** An audit record per call, to a callback and/or a rotating JSONL file. */
  audit?: AuditOptions
  /** Every turn (or a share of them) recorded, to be replayed as a test by `replay()` of toolgate/testing. */
  record?: RecordOptions
  /** Spans through `@opentelemetry/api` when the application has it (default true; nothing happens without it). */
  otel?: boolean
  /** Results carry stage timings (`metadata.timings`, `metadata.starts`), as `renderTimeline` draws them. On
   * whenever `onTrace` or `audit` is set. */
  trace?: boolean
  /** A clock a test moves (`manualClock()` of toolgate/testing): every deadline the executor keeps runs on it. */
  clock?: { now(): number; advance(ms: number): Promise<void> }
  /** Rate limits, cache, single flight, sessions, breakers and budgets shared by every process using the same store
   * (Redis: `redisStore({ client })` of toolgate/redis). The in-memory store of this process without it. */
  store?: SharedStore
  /** The circuit breaker of tools that declare none (off by default). */
  breaker?: BreakerOptions | boolean
  /** Limits on all calls together. */
  budget?: Budget
}

export type Risk = 'read' | 'write' | 'destructive' | 'admin'
export type PermissionMode = 'default' | 'acceptAll' | 'readOnly' | 'denyAll'
/** A tool name or pattern (`mcp__*`), or one with argument patterns: `{ tool: 'shell', args: { command: 'rm *' } }`. */
export type PermissionRule = string | { tool: string; args?: Record<string, string>; reason?: string }
export interface Permissions {
  /** What a call no rule matches gets (no mode: it runs). */
  mode?: PermissionMode
  deny?: PermissionRule[]
  ask?: PermissionRule[]
  allow?: PermissionRule[]
}
export interface ApprovalRequest {
  callId: string
  toolName: string
  arguments: Record<string, unknown>
  /** The rule, mode or declaration that asked, e.g. `ask shell(command: git push*) (executor permissions)`. */
  rule: string
  reason?: string
  context: unknown
}
export type ApprovalAnswer =
  | boolean
  | 'approve'
  | 'deny'
  | { decision: 'approve'; arguments?: Record<string, unknown>; remember?: 'session' }
  | { decision: 'deny'; reason?: string }

export interface RepairOptions {
  /** Malformed argument JSON: code fences, trailing commas, single quotes, unquoted keys, Python literals, comments,
   * a cut-off end, words or tags around the one object, the object sent as a JSON string (once or twice). Default true. */
  json?: boolean
  /** Aliases and near-miss keys (case and separators, a leading underscore, one or two typos). Default true. */
  keys?: boolean
  /** Values of the wrong type, converted to the declared one when that is certain. Default true. */
  types?: boolean
  /** Arguments one level down under a key the schema lacks (`arguments`, `args`, `input`, `parameters`, `params`,
   * the tool's name) or in an echo of the whole call (`{ name, arguments }`). Default true. */
  wrappers?: boolean
  /** An unknown tool name that is one usable tool's name ignoring case and separators. Default false. */
  toolNames?: boolean
  /** The model's result says in one line what was adjusted. Default true. */
  note?: boolean
}

/** One repair: where (a JSON pointer into the arguments; '' for the whole text or the tool name), before, after. */
export interface Repair {
  path: string
  before: unknown
  after: unknown
  rule:
    | 'json-code-fence' | 'json-trailing-commas' | 'json-single-quotes' | 'json-unquoted-keys' | 'json-python-literals'
    | 'json-truncated' | 'json-control-characters' | 'json-comments' | 'json-text-around' | 'json-double-encoded'
    | 'wrapper-key' | 'call-echo' | 'alias' | 'key-case' | 'key-underscore' | 'key-typo'
    | 'string-to-number' | 'string-to-integer' | 'number-to-integer' | 'string-to-boolean' | 'number-to-string'
    | 'scalar-to-array' | 'json-string' | 'null-omitted' | 'enum-case' | 'tool-name'
    /** Halves of UTF-16 surrogate pairs in the arguments, read as U+FFFD: `before` counts them. */
    | 'lone-surrogate'
}

export type RollbackRule = { emptyAt: string } | { startsWith: string } | { matches: string }

export interface RedactOptions {
  /** The built-in rules (cloud and API keys, tokens, JWTs, private keys, `password=` assignments). Default true. */
  builtin?: boolean
  /** More rules: regular expressions (linear-time engine: no pattern can backtrack catastrophically). */
  patterns?: (string | { name?: string; pattern: string })[]
  /** Exact strings to redact wherever they appear (rule `literal`). */
  literals?: string[]
  /** Names of environment variables whose values are redacted wherever they appear (rule `env:NAME`; values
   * shorter than 6 characters are ignored). */
  env?: string[]
  /** Email addresses (rule `email`). Default false. */
  emails?: boolean
  /** Phone numbers (rule `phone`). Default false. */
  phones?: boolean
}

export interface ArtifactOptions {
  /** The folder (default: a fresh one under the system's temporary folder, removed by `close()`). */
  dir?: string
  /** The folder's size cap: the oldest artifacts go first. Default 256 MiB. */
  maxBytes?: number
  /** How long an artifact is kept. Default 24 h. */
  ttlMs?: number
}

export interface ProgressEvent {
  callId: string
  toolName: string
  attempt: number
  /** What the handler passed to `ctx.progress(info)`. */
  info: unknown
}

/** A handler settled after its call had already been answered (timed out or cancelled): its effects came late. */
export interface LateSettlementEvent {
  type: 'late_settlement'
  callId: string
  toolName: string
  attempt: number
  endedBy: 'timeout' | 'idle_timeout' | 'cancelled'
  outcome: 'resolved' | 'rejected'
  /** How long after the call was answered the handler settled. */
  afterMs: number
  /** The call's arguments, secrets redacted and size capped. */
  args: unknown
}
/** One station a call passed, from a finished turn (delivered in a batch per turn, after `execute` resolves). */
export interface StationEvent {
  type: 'station'
  /** The turn: every event of one `execute` shares it. */
  traceId: string
  callId: string
  toolName: string
  station: Station | 'dedup' | 'cache' | 'rate_limit' | 'retry'
  outcome: string
  /** When the station decided, ms since the epoch. */
  at: number
  /** Until the call's next station decided. */
  durationMs: number
  /** What decided: the rule, the repairs, the cache hit, the attempt, the retry. */
  decided?: unknown
  /** On a call's first event: its arguments as sent, secrets redacted and size capped. */
  args?: unknown
}
/** A tool's circuit breaker changed state (seen by this process; with a shared store, when its own call's answer
 * said so). */
export interface BreakerEvent {
  type: 'breaker'
  toolName: string
  from: BreakerState
  to: BreakerState
  /** ms since the epoch. */
  at: number
  /** On an opening: the counted calls and failures in the window. */
  calls?: number
  failures?: number
}
export type BreakerState = 'closed' | 'open' | 'half_open'
/** Which budget refused a call: the limit, where it was declared, how much was used, whose it is. */
export interface BudgetNote {
  budget: 'maxCallsPerTurn' | 'maxCalls' | 'maxCallsPerWindow' | 'maxCost'
  source: 'executor' | 'tool' | 'context'
  limit: number
  used: number
  /** What the refused call would have cost. */
  cost?: number
  /** Each `by` field and its value ('' when the context had none). */
  by: Record<string, string>
  /** When a window's budget starts over. */
  resetsInMs?: number
}
/** What `watch()` hears. `turn` names the turn as trace events do; `index` is a call's place in it. */
export type WatchEvent =
  | { type: 'turn'; turn: string; at: number; streaming: boolean }
  /** A call as it came (`at`): its id and arguments as a trace shows them (secrets redacted, size capped). */
  | { type: 'call'; turn: string; index: number; callId?: string; name?: string; args: unknown; at: number }
  /** A station the call met: a wait begun (`permission:asked`, `rate_limit:waited`, `cache:joined`,
   * `retry:scheduled`), a decision, or the call sealed (`sealed:ok`, `sealed:cached`, `sealed:<error kind>`); `ms`
   * since its turn began (a streaming turn's call: since it was added). */
  | { type: 'station'; turn: string; index: number; station: Station | 'dedup' | 'cache' | 'rate_limit' | 'retry' | 'sealed'; outcome: string; ms: number }
  /** A handler started; its first attempt says the arguments it was given (after repair), as a trace shows them. */
  | { type: 'start'; turn: string; index: number; name: string; attempt: number; at: number; args?: unknown }
  /** The application was asked: a schema's own validation, a tool's check or cost, an approval. */
  | { type: 'ask'; turn: string; index: number; kind: 'validate' | 'check' | 'cost' | 'approve'; at: number }
  | { type: 'result'; turn: string; index: number; result: ToolResult }
  | { type: 'done'; turn: string; at: number }

/** Recording a turn failed (`record` option): said once per executor; `stats().recording.failed` counts them all. */
export interface RecordFailedEvent {
  type: 'record_failed'
  error: string
  at: number
}
export type TraceEvent = StationEvent | LateSettlementEvent | BreakerEvent | RecordFailedEvent

/** What one call of a command tool runs: a program and its arguments (no shell), or a command string for
 * `/bin/sh -c`; with optionally its own working folder, extra environment variables and text for its stdin. */
export type CommandInvocation = ({ argv: [string, ...string[]]; shell?: never } | { shell: string; argv?: never }) & {
  cwd?: string
  env?: Record<string, string>
  stdin?: string
}
/** A command tool: a tool whose calls run a process the engine spawns, reads and stops. */
export interface CommandToolSpec<P extends ToolSchema = ToolSchema, Ctx = ExecutionContext, Args = ToolArgs<P>>
  extends Omit<ToolSpec<P, Ctx, undefined, Args>, 'handler' | 'outputSchema'> {
  /** What a call runs, from its arguments. Throwing (or rejecting) fails the call with `handler_error`. */
  command: (args: NoInfer<Args>, ctx: ToolContext<Ctx>) => CommandInvocation | Promise<CommandInvocation>
  /** The working folder (default: the server's); `command(args)` may give one per call. */
  cwd?: string
  /** Variables set for every call, over what is inherited. */
  env?: Record<string, string>
  /** What the command inherits of the server's environment: a safe minimal set (PATH, HOME, USER, LANG, TERM, TZ,
   * TMPDIR, …) by default, plus the names listed; `true`: everything; `false`: nothing. */
  inheritEnv?: boolean | string[]
  /** After SIGTERM to the command's process group, how long until SIGKILL (default 2000 ms). */
  killGraceMs?: number
  /** At `timeoutMs`: stop the command (`'kill'`, the default) or keep it running as a background job the job tools
   * read and stop (`'background'`). Silence past `idleTimeoutMs` always stops it. */
  onTimeout?: 'kill' | 'background'
  /** Bytes of each stream kept in memory, half from its start and half from its end (default 256 KiB); the middle goes
   * to a file (up to `spillBytes`, default 8 MiB) that becomes an artifact. */
  captureBytes?: number
  spillBytes?: number
  /** A non-zero exit code makes the call a `handler_error` (default: a success that reports the code). */
  failOnExitCode?: boolean
  /** How long a background job may run before it is stopped (default 30 minutes). */
  jobTimeoutMs?: number
}
/** How a command tool's process ended (`metadata.command`). */
export interface CommandReport {
  endedBy: 'exit' | 'timeout' | 'idle_timeout' | 'cancelled' | 'background' | 'spawn_failed'
  /** The process the tool started; also its process group's id. */
  pid?: number
  exitCode?: number
  /** The signal that ended the process, when one did. */
  signal?: string
  /** The last signal the engine sent its process group: `SIGTERM`, or `SIGKILL` once the grace ran out. */
  stoppedWith?: 'SIGTERM' | 'SIGKILL'
  /** It exited leaving processes of its group running; they were stopped. */
  leftoversStopped?: true
  /** Something it started still runs (it left the command's session). */
  stillRunning?: true
  /** The limit that ended it, in ms. */
  limitMs?: number
  /** Moved to the background: its job. */
  jobId?: number
  durationMs: number
  stdoutBytes: number
  stderrBytes: number
  /** Bytes of a stream left out of the result (between its start and its end), and of those the ones kept nowhere
   * (past what its artifact could hold); absent when none. The result's text says the same first. */
  stdoutOmittedBytes?: number
  stdoutDroppedBytes?: number
  stderrOmittedBytes?: number
  stderrDroppedBytes?: number
  /** Where a stream too long to keep whole in the result was saved. */
  stdoutArtifact?: string
  stderrArtifact?: string
  spawnError?: string
}

/** One audit record per call: the JSONL file's lines and `audit.onRecord`'s argument. */
export interface AuditRecord {
  traceId: string
  callId: string
  tool: string
  agentId?: string
  sessionId?: string
  userId?: string
  tenantId?: string
  /** As sent, secrets redacted and size capped. */
  args: unknown
  /** ISO time the handler first started (the turn's start when it never ran). */
  startedAt: string
  durationMs: number
  status: 'ok' | 'error'
  errorKind?: ErrorKind
  error?: string
  attempts: number
  cached: boolean
  truncated: boolean
  outputChars: number
}

export interface AuditOptions {
  /** An append-only JSONL file: one record per line, each written whole. */
  file?: string
  /** Rotate past this size (`file` → `file.1` → …). Default 10 MiB. */
  maxBytes?: number
  /** Rotated files kept. Default 5. */
  keep?: number
  onRecord?: (record: AuditRecord) => void
}

export interface RecordOptions {
  /** An append-only JSONL file (one turn per line, each written whole), or a function given each turn. */
  to: string | ((entry: RecordedTurn) => void)
  /** The file rotates past this size (`file` → `file.1` → …); a turn larger than this is not recorded. Default 64 MiB. */
  maxBytes?: number
  /** Rotated files kept. Default 1. */
  keep?: number
  /** The share of turns recorded, from 0 to 1. Default 1. */
  sample?: number
  /** Context fields recorded besides those the gate reads (its string and number fields, `permissions`, `maxRisk`,
   * `budget`, `allowedTools`, `deniedTools`, `approvedTools`). */
  include?: string[]
}

/** How a handler's run ended, as the handler gave it (`none`: no answer before the gate stopped waiting). */
export type RecordedRun = {
  /** The call's place in the turn, and which attempt this was. */
  index: number
  attempt: number
  /** ms after the turn began. */
  startMs: number
  durationMs: number
  /** When the handler reported progress, in ms after it started. */
  progressMs?: number[]
} & (
  /** `valueFrom: 'result'`: the value is the call's result's `metadata.structured` (not repeated here); bytes that
   * are UTF-8 text are kept as `text`, other bytes as base64 in `value`. */
  | { outcome: 'returned'; valueKind: 'text' | 'json' | 'none' | 'binary' | 'unrepresentable'; value?: unknown; valueFrom?: 'result'; text?: string }
  | { outcome: 'threw'; error: { name: string; message: string; code?: string | number; status?: number; retryable?: boolean; retryAfterMs?: number; causeCode?: string } | { nonError: string } }
  | { outcome: 'command' }
  | { outcome: 'none' }
)

/** What the application answered for a call: its tool's check or cost, or the approval (as the callback decided it). */
export type RecordedAnswer = {
  index: number
  kind: 'check' | 'cost' | 'approve'
  /** When it was asked, in ms after the turn began. */
  atMs: number
} & ({ durationMs: number; answer: Record<string, unknown>; unanswered?: never } | { unanswered: true })

/** One turn as recorded: what `replay` needs to run it again, secrets redacted by the executor's rules. */
export interface RecordedTurn {
  version: 1
  /** When the turn began, ms since the epoch (on the executor's clock). */
  at: number
  /** Which executor recorded it: a replay gives each its own gate. */
  executor: string
  kind: 'execute' | 'streaming'
  options: { deadlineMs?: number; stopOnError?: boolean }
  context?: Record<string, unknown>
  /** The calls as received. */
  calls: unknown[]
  /** A streaming turn's: when each call arrived, and when the turn was ended (ms after it began). */
  arrivedMs?: number[]
  endedMs?: number
  /** `reason` as the caller gave it; `closed`: by the executor's `close()`; `before`: the turn began cancelled
   * (`reason` is then the text its calls' results quote). */
  cancelled?: { atMs: number; reason?: string; closed?: true; before?: true }
  answers: RecordedAnswer[]
  runs: RecordedRun[]
  results: ToolResult[]
}

/** `stats().recording`: turns recorded, left out by `sample`, too large to record, and failed to write. */
export interface RecordingStats {
  recorded: number
  sampledOut: number
  tooLarge: number
  failed: number
}

export interface PendingHandler {
  callId: string
  toolName: string
  attempt: number
  /** `abandoned`: its call was already answered (timed out or cancelled) but the handler has not settled. */
  state: 'running' | 'abandoned'
  reason?: 'timeout' | 'idle_timeout' | 'cancelled'
  runningMs: number
}

export interface ToolCounters {
  retries: number
  timeouts: number
  idleTimeouts: number
  lateSettlements: number
  cacheHits: number
  cacheMisses: number
  /** Calls that shared an identical call's execution. */
  sharedFlights: number
  /** Repeated queries in a session (whatever the policy did with them). */
  duplicates: number
  rateLimited: number
  /** Times the circuit breaker opened, and calls it answered `unavailable`. */
  breakerOpened: number
  breakerRefused: number
  budgetExceeded: number
}
/** A tool's (or all tools') counters and call metrics. */
export interface ToolStats extends ToolCounters {
  calls: number
  successes: number
  failures: Partial<Record<ErrorKind, number>>
  /** Handlers running now. */
  inFlight: number
  /** How long handlers ran (quantiles within 10%; null before any ran). */
  latencyMs: { count: number; sum: number; p50: number | null; p95: number | null; p99: number | null }
  /** For a tool with a circuit breaker: its state (with a shared store, as this process last heard it). */
  breaker?: BreakerState
}
export interface ExecutorStats {
  total: ToolStats
  tools: Record<string, ToolStats>
  /** With a shared store: operations sent, failed (timeouts included), tickets not answered within `timeoutMs`,
   * results the store failed, and round trips out now. */
  store?: StoreStats
  /** With `record`: what became of the turns. */
  recording?: RecordingStats
}
export interface StoreStats {
  operations: number
  errors: number
  timeouts: number
  unavailable: number
  /** Round trips out now, and late answers kept until their call settles. */
  pending: number
}
/** What a station does when the shared store fails: go on without it, or not run the call. */
export type StoreFailure = 'open' | 'closed'
/** A store shared between processes, as `redisStore()` of toolgate/redis makes one. */
export interface SharedStore {
  readonly kind: string
  /** How long one round trip may take before the store counts as unavailable for it. */
  readonly timeoutMs: number
  readonly onError: { cache: StoreFailure; dedup: StoreFailure; rateLimit: StoreFailure; sessions: StoreFailure; budget: StoreFailure; breaker: StoreFailure }
  /** Runs a batch of operations; one reply per operation, `{ error }` for one that failed. Never rejects. It may
   * also tell each reply to `onReply` as it comes: an operation answered early is then used at once, whatever
   * keeps the others. */
  run(ops: readonly object[], onReply?: (index: number, reply: object) => void): Promise<object[]>
  /** Drops cached entries whose cache key starts with `prefix` ('' for all), in every process; resolves to how many. */
  invalidate(prefix: string): Promise<number>
}
export interface WatchOptions {
  /** Also answers the approvals of the calls this watcher follows, beside the approval callback (which need not be
   * set): the first answer decides. Returning nothing (or throwing) decides nothing while another may answer.
   * Edited `arguments` are applied to the call's own: a value left as it was shown (redacted, cut) keeps the call's; a
   * changed value is taken as given, and refused if it still holds a redaction or a cut's mark. */
  approve?: (request: WatchedApproval) => ApprovalAnswer | undefined | Promise<ApprovalAnswer | undefined>
}
/** An approval as a watcher is asked it: the call's id and arguments as a trace shows them (redacted, capped), where
 * it is (`turn` and `index` as its watch events say), and a signal that aborts, with the reason as a string, once the
 * approval no longer waits on the watcher (decided, the call ended, watching stopped). */
export interface WatchedApproval {
  turn: string
  index: number
  callId: string
  toolName: string
  arguments: unknown
  rule?: string
  reason?: string
  signal: AbortSignal
}
/** A breaker as `inspect()` shows it: while closed, what its window counts; while open, the wait before a trial. */
export interface BreakerView {
  state: BreakerState
  calls: number
  failures: number
  halfOpenInMs?: number
}
/** What `inspect()` shows: breakers by tool, and with the memory store what it holds. */
export interface GateInspection {
  store: 'memory' | 'shared'
  breakers: Record<string, BreakerView>
  memory?: {
    cacheEntries: number
    cacheBytes: number
    maxCacheEntries: number
    maxCacheBytes: number
    /** Sessions whose repeated queries are counted. */
    sessions: number
    /** Buckets not full again yet, the emptiest first: tokens left when last taken from. */
    buckets: { key: string; tokens: number; fullInMs: number }[]
    bucketCount: number
    /** Budget counters, the most used first, and when each goes. */
    budgets: { key: string; used: number; expiresInMs: number }[]
    budgetCount: number
  }
}
export interface HealthReport {
  status: 'ok' | 'degraded' | 'failing'
  tools: Record<string, { status: 'ok' | 'degraded' | 'failing'; calls: number; errorRate: number; timeoutRate: number; p95Ms: number | null; inFlight: number; lateSettlements: number; breaker?: BreakerState }>
  inFlight: number
  abandonedHandlers: number
}

/** Throw it (or any error with `retryable: true`) to ask for another attempt under the tool's retry policy. */
export declare class RetryableError extends Error {
  constructor(message?: string, options?: { retryAfterMs?: number; cause?: unknown })
  readonly retryable: true
  readonly retryAfterMs?: number
}

/**
 * What the caller knows about the turn. toolgate reads the fields below; everything else is passed to handlers
 * untouched (`ctx.context`).
 */
export interface ExecutionContext {
  /** When set, only these tools (names or `*` globs) may run, be listed or be suggested. */
  allowedTools?: string[]
  /** These tools (names or `*` globs) may not run and are never listed or suggested. */
  deniedTools?: string[]
  /** Tools whose asks are approved for this turn without calling the approval callback. */
  approvedTools?: string[]
  /** Tools above this risk may not run and are never listed or suggested. */
  maxRisk?: Risk
  /** Limits on the calls of this context's holder (on top of the executor's and each tool's budgets). */
  budget?: Budget
  /** This context's rules and mode, on top of the executor's (its deny rules always hold). */
  permissions?: Permissions
  /** Keys session dedup (and "approve for this session"). Any string or number field can also key a cache scope or a rate-limit bucket. */
  sessionId?: string
  [key: string]: unknown
}

export interface ExecuteOptions<Ctx = ExecutionContext> {
  /** Aborting it aborts running handlers and cancels calls not yet started. */
  signal?: AbortSignal
  context?: Ctx
  /** The whole turn's budget in ms: calls not started by then are `not_executed`, running ones are stopped. */
  deadlineMs?: number
  /** After a state-changing call fails, the calls after it are `not_executed` (default: no cascade). */
  stopOnError?: boolean
  /** This turn's `ctx.progress()` events. */
  onProgress?: (event: ProgressEvent) => void
  /** Decides this turn's asks in place of the executor's `approve` (a server asking its own client's user). */
  approve?: (request: ApprovalRequest) => ApprovalAnswer | Promise<ApprovalAnswer>
}

/** Anthropic `tool_use` content block. */
export interface AnthropicToolUse {
  type: 'tool_use'
  id: string
  name: string
  input: unknown
}
/** OpenAI Responses API `function_call` output item (`arguments` is a JSON string). */
export interface OpenAIResponsesFunctionCall {
  type: 'function_call'
  call_id: string
  name: string
  arguments: string
  id?: string
}
/** OpenAI Chat Completions `message.tool_calls[i]`. */
export interface OpenAIChatToolCall {
  id: string
  type: 'function'
  function: { name: string; arguments: string }
}
/** AI SDK tool-call part (`input` in v5, `args` in v4). */
export interface AISDKToolCall {
  type: 'tool-call'
  toolCallId: string
  toolName: string
  input?: unknown
  args?: unknown
}
/** Gemini function call (`FunctionCall` of `@google/genai`, as `response.functionCalls` lists them). Gemini often
 * sends no id: one is generated, and `formatResults(results, 'gemini')` answers with it. */
export interface GeminiFunctionCall {
  id?: string
  name?: string
  args?: Record<string, unknown>
}
/** Gemini content part (a `Part` of `@google/genai`), so that `parts.filter((p) => p.functionCall)` is taken as it
 * is: one without a `functionCall` gets an `invalid_arguments` result. */
export interface GeminiFunctionCallPart {
  functionCall?: GeminiFunctionCall
}
/** Bedrock Converse content block (`ContentBlock` of `@aws-sdk/client-bedrock-runtime`), so that
 * `content.filter((b) => b.toolUse)` is taken as it is: one without a `toolUse` gets an `invalid_arguments` result. */
export interface BedrockToolUseBlock {
  toolUse?: { toolUseId?: string; name?: string; input?: unknown }
}
/** LangChain `ToolCall` (`AIMessage.tool_calls[i]`; `invalid_tool_calls[i]` carries `args` as the raw text). */
export interface LangChainToolCall {
  id?: string
  /** Missing only on an invalid call. */
  name?: string
  args?: string | Record<string, unknown>
  type?: 'tool_call' | 'invalid_tool_call'
}
/** MCP `tools/call` request params: the call is named by `_meta.progressToken` when there is one (so progress and
 * results pair up with the client's token), else its id is generated. */
export interface MCPCallToolParams {
  name: string
  arguments?: Record<string, unknown>
  _meta?: { progressToken?: string | number }
}
/** Any other `{ id?, name, … }`: a missing id is generated; an empty arguments string means `{}`. */
export interface GenericToolCall {
  id?: string
  name: string
  arguments?: string | Record<string, unknown>
  input?: unknown
  args?: string | Record<string, unknown>
}
export type ToolCall =
  | AnthropicToolUse
  | OpenAIResponsesFunctionCall
  | OpenAIChatToolCall
  | AISDKToolCall
  | GeminiFunctionCallPart
  | GeminiFunctionCall
  | BedrockToolUseBlock
  | LangChainToolCall
  | MCPCallToolParams
  | GenericToolCall

/** The stations a call reached. */
export type Station = 'lookup' | 'parse' | 'repair' | 'validate' | 'schema' | 'check' | 'cost' | 'permission' | 'approval' | 'budget' | 'breaker' | 'invoke' | 'normalize' | 'shape' | 'judge'
/** One station's verdict on a call, as `"station:outcome"`, e.g. `"permission:allowed"`, `"invoke:timeout"`. */
export type StationMark = `${Station | 'dedup' | 'cache' | 'rate_limit' | 'retry'}:${string}`

export interface ToolResultMetadata {
  /** A process-style result's stderr, whole (the model sees a summary). */
  stderr?: string
  exitCode?: unknown
  /** The handler's object or array return value, parsed back from the JSON the model reads. */
  structured?: unknown
  /** A thrown Error's name, `code` and stack (never shown to the model). */
  errorName?: string
  errorCode?: string | number
  stack?: string
  /** Length in characters before truncation, when `truncated`. */
  originalChars?: number
  /** Where the whole output (or a binary result) was saved. */
  artifactPath?: string
  /** How many secrets each redaction rule removed, e.g. `{ 'github-token': 1 }`. */
  redactions?: Record<string, number>
  /** A binary result's size and sniffed type (its data is in the artifact). */
  binary?: { bytes: number; mediaType: string }
  /** With tracing on: when each stage decided, in ms since the turn began (parallel to `stages`). */
  timings?: number[]
  /** With tracing on: when each attempt's handler started, in ms since the turn began. */
  starts?: number[]
  /** What the permission station decided, and the rule, mode or answer that decided it. */
  permission?: { decision: 'allowed' | 'approved' | 'accepted' | 'denied'; by: string }
  /** What the repair station changed in the call before it ran. */
  repairs?: Repair[]
  /** The result matched `rollbackWhen`, but the session had reached `maxConsecutiveRollbacks`. */
  rollbackSuppressed?: true
  /** Images the handler returned (`{ type: 'image', data, mediaType }`), for the formats that take them. */
  images?: ToolImage[]
  /** Every failed attempt before the last, when the call was retried. */
  attemptErrors?: { attempt: number; errorKind: ErrorKind; error: string; retryInMs: number }[]
  /** The result of an identical call that ran at the same time, shared (single flight). */
  sharedFlight?: true
  /** How many times this exact query ran before in the session. */
  repeats?: number
  /** The earlier result of the same query in this session, given again (dedup policy `reuse`). */
  reused?: true
  /** The shared store failed this call: it went on without it (stations that fail open) or was not run. */
  store?: 'unavailable'
  /** What the shared store answered, or that it did not answer in time. */
  storeError?: string
  /** The budget that refused the call. */
  budget?: BudgetNote
  /** A command tool's call: how its process ended. */
  command?: CommandReport
  /** The stations the call passed, in order, and what each decided: the call's trace record. */
  stages: StationMark[]
  /** When the turn began, in ms since the Unix epoch. */
  startedAt: number
  /** How long the call waited for the scheduler before its handler started, in ms. */
  queuedMs?: number
}

export interface ToolImage {
  /** Always an image type (the engine passes no other as an image). */
  mediaType: `image/${string}`
  /** Base64. */
  data: string
}

export interface ToolResult {
  callId: string
  name: string
  /** Decided by the executor, never inferred from the output. */
  success: boolean
  /** What the model reads: the output on success, `Error (kind): …` on failure. */
  output: string
  /** What went wrong and how to fix it, worded for a model. */
  error?: string
  errorKind?: ErrorKind
  /** May the same call succeed later, unchanged? */
  retryable: boolean
  /** How long to wait before trying again, when the failure said so (`retryAfterMs`, a Retry-After header). */
  retryAfterMs?: number
  /** How long the handler ran, in ms (0 when it did not run). */
  latencyMs: number
  /** How many times the handler was started (0 when the call was refused before invoke; more when retried). */
  attempts: number
  cached: boolean
  truncated: boolean
  /** Set when the tool's `rollbackWhen` judged this success useless: undo the step and try another way. */
  rollback?: { reason: string }
  metadata: ToolResultMetadata
}

export interface RegisteredTool {
  name: string
  description: string
  parameters: ObjectJsonSchema
  readOnly: boolean
  idempotent: boolean
  needsApproval: boolean
  risk: Risk
  untrusted: boolean
  /** The output's JSON Schema, when the tool declares one. */
  outputSchema?: Parsed<JsonSchema>
  origin?: ToolOrigin
  timeoutMs: number
  idleTimeoutMs?: number
  maxConcurrency?: number
  maxOutputChars: number
  retry: Required<RetryPolicy>
  /** Its circuit breaker, when on (its own, else the executor's), with the defaults filled in. */
  breaker?: Required<BreakerOptions>
  budget?: Budget
  /** What a call costs, when not 0: a number, or 'function' when a function of the arguments says. */
  cost?: number | 'function'
}

export type DefinitionFormat = 'openai-responses' | 'openai-chat' | 'anthropic' | 'ai-sdk' | 'gemini' | 'bedrock'

export interface OpenAIResponsesTool {
  type: 'function'
  name: string
  description: string
  parameters: ObjectJsonSchema
  /** Always false: strict mode would make every optional parameter required. */
  strict: false
}
export interface OpenAIChatTool {
  type: 'function'
  function: { name: string; description: string; parameters: ObjectJsonSchema }
}
export interface AnthropicTool {
  name: string
  description: string
  input_schema: ObjectJsonSchema
}
/** The AI SDK's provider-level function tool (LanguageModelV2FunctionTool). */
export interface AISDKFunctionTool {
  type: 'function'
  name: string
  description: string
  inputSchema: ObjectJsonSchema
}

/** Named and valued as `Type` of `@google/genai`, so that a schema typed with it is one of the SDK's: TypeScript
 * relates two enums by their name and members. */
declare enum Type {
  STRING = 'STRING',
  NUMBER = 'NUMBER',
  INTEGER = 'INTEGER',
  BOOLEAN = 'BOOLEAN',
  ARRAY = 'ARRAY',
  OBJECT = 'OBJECT',
  NULL = 'NULL',
}
/** A schema in Gemini's dialect (`Schema` of `@google/genai`, a subset of OpenAPI 3.0): the counts are int64, so
 * JSON strings. */
export interface GeminiSchema {
  type?: Type
  title?: string
  description?: string
  nullable?: boolean
  enum?: string[]
  format?: string
  pattern?: string
  minLength?: string
  maxLength?: string
  minimum?: number
  maximum?: number
  items?: GeminiSchema
  minItems?: string
  maxItems?: string
  properties?: Record<string, GeminiSchema>
  required?: string[]
  propertyOrdering?: string[]
  minProperties?: string
  maxProperties?: string
  anyOf?: GeminiSchema[]
  default?: unknown
  example?: unknown
}
/** A Gemini `FunctionDeclaration`, for `config.tools: [{ functionDeclarations }]`. No `parameters` for a tool that
 * takes none (Gemini refuses an object schema without properties). */
export interface GeminiFunctionDeclaration {
  name: string
  description?: string
  parameters?: GeminiSchema
}
/** A JSON value (`DocumentType` of the AWS SDK). */
export type BedrockDocument = null | boolean | number | string | BedrockDocument[] | { [key: string]: BedrockDocument }
/** A Bedrock Converse tool (`Tool.ToolSpecMember`), for `toolConfig.tools`; the schema is the gate's JSON Schema. */
export interface BedrockTool {
  toolSpec: { name: string; description?: string; inputSchema: { json: { [keyword: string]: BedrockDocument } } }
}

export interface DefinitionsOptions {
  /** Only the tools this context may use. */
  context?: ExecutionContext
}

export declare class ToolExecutor<Ctx extends ExecutionContext = ExecutionContext> {
  constructor(options?: ExecutorOptions)
  /**
   * Throws a TypeError on a bad name, a schema that does not compile, a duplicate name (unless `replace`), or an
   * unknown field. The handler's (and `check`'s) `args` follow from `parameters` (see `ToolArgs`) and its return
   * type is checked against `outputSchema`. `register<Args>` states the arguments' type instead, unchecked against
   * `parameters`: for a schema whose type says nothing, such as one loaded at run time.
   */
  register<
    Args = never,
    const P extends ToolSchema = ToolSchema,
    const O extends ToolSchema | undefined = ToolSchema | undefined,
  >(
    spec: ToolSpec<P, Ctx, O, [Args] extends [never] ? ToolArgs<P> : Args>,
  ): this
  /**
   * Registers a command tool: each call runs the process `command(args)` names, in a process group of its own, read
   * into bounded buffers and stopped whole (SIGTERM, SIGKILL after `killGraceMs`) on timeout, silence, cancel or
   * `close()`. With `onTimeout: 'background'`, also registers `job_status`, `job_output` and `job_kill`. Throws on
   * Windows, and as `register` does.
   */
  registerCommand<Args = never, const P extends ToolSchema = ToolSchema>(
    spec: CommandToolSpec<P, Ctx, [Args] extends [never] ? ToolArgs<P> : Args>,
  ): this
  /** Registers `read_artifact(path, offset?, limit?)` and `search_artifact(path, pattern)`, with which a model
   * pages through outputs saved to artifacts. They read only this executor's artifacts. */
  registerArtifactTools(): this
  /** Removes a tool; false when there was none by that name. */
  unregister(name: string): boolean
  list(options?: DefinitionsOptions): RegisteredTool[]
  definitions(format: 'openai-responses', options?: DefinitionsOptions): OpenAIResponsesTool[]
  definitions(format: 'openai-chat', options?: DefinitionsOptions): OpenAIChatTool[]
  definitions(format: 'anthropic', options?: DefinitionsOptions): AnthropicTool[]
  /** With the AI SDK's `jsonSchema` helper: the `tools` record (`ToolSet`) `generateText` takes, without `execute`.
   * Pass the helper of the `ai` major you call: each major's schemas are its own type. */
  definitions<S>(
    format: 'ai-sdk',
    options: DefinitionsOptions & { jsonSchema: (schema: ObjectJsonSchema) => S },
  ): Record<string, { description: string; inputSchema: S }>
  definitions(format: 'ai-sdk', options?: DefinitionsOptions): AISDKFunctionTool[]
  /** Throws a TypeError, naming the tool and the keyword, for a schema Gemini's dialect cannot carry (see the
   * README) or a name that does not start with a letter or '_'. */
  definitions(format: 'gemini', options?: DefinitionsOptions): GeminiFunctionDeclaration[]
  definitions(format: 'bedrock', options?: DefinitionsOptions): BedrockTool[]
  /** Handlers running now, across all turns. */
  readonly running: number
  /** Every handler that has not settled, including those whose calls already timed out or were cancelled. */
  pendingHandlers(): PendingHandler[]
  /** Per tool and in total: calls, successes, failures by kind, latency p50/p95/p99, handlers in flight, and the
   * counters of retries, timeouts, late settlements, cache, flights, duplicates and rate limits. */
  stats(): ExecutorStats
  /** `stats()` in Prometheus text format (0.0.4), for a Node server's `/metrics`. */
  prometheus(): string
  /** Each tool's status from its error and timeout rates, and the worst of them. */
  healthReport(): HealthReport
  /** What the gate holds now: each breaker, and the memory store's cache, sessions, rate-limit buckets and budget
   * counters (the `limit` most used of each, default 50; keys redacted). A shared store keeps its own. */
  inspect(options?: { limit?: number }): GateInspection
  /** Watches turns live: `listener(events)` hears, in batches, each turn as it begins, its calls, each station a call
   * meets as it meets it (a wait begun, a decision, the call sealed), each handler started, each question put to the
   * application, and the results. Returns what stops it; nothing of it is done while nobody watches. */
  watch(listener: (events: WatchEvent[]) => void, options?: WatchOptions): () => void
  /** Forgets cached results of `tool`, or only those for `args`; returns how many were dropped. */
  /** How many cached results were dropped; with a shared store, a promise of it, once every process's are gone. */
  invalidate(tool: string, args?: Record<string, unknown>): number | Promise<number>
  clearCache(): void | Promise<number>
  /**
   * Cancels every open turn and waits at most `timeoutMs` (default 1000, well inside a test runner's default test
   * timeout; give more for a longer graceful wait) for handlers still running, and for the processes of command
   * tools it stopped until they are gone (their `killGraceMs` past); resolves to the handlers still running then. Removes the artifacts. `execute` rejects afterwards.
   */
  close(options?: { timeoutMs?: number }): Promise<{ stillRunning: PendingHandler[] }>
  /**
   * Runs one turn. Resolves to one result per call, in input order; every failure is a result.
   * Rejects (never throws synchronously) only for programmer errors: `calls` not an array, a malformed
   * `context` or `signal`.
   */
  execute(calls: readonly ToolCall[], options?: ExecuteOptions<Ctx>): Promise<ToolResult[]>
  /**
   * Opens a streaming turn: calls are added as the model streams them and each starts as soon as the scheduler
   * allows (reads together, a write alone and in its place). `options` mean what they mean for `execute`, the
   * turn's time limit counted from now. Throws only for programmer errors.
   */
  turn(options?: ExecuteOptions<Ctx>): ToolTurn
}

/** The provider stream formats `ToolTurn.tap` reads tool calls from. */
export type StreamFormat = 'anthropic' | 'openai-responses' | 'openai-chat' | 'gemini' | 'bedrock'

/**
 * A turn that takes its calls as they arrive (`gate.turn()`). For any sequence of `add`s, `results` equals what
 * `execute` gives for the same calls, apart from timing fields.
 */
export interface ToolTurn extends AsyncIterable<ToolResult> {
  /**
   * Adds a call in any shape `execute` takes; it starts as soon as the scheduler allows. Resolves to its result
   * (never rejects). Throws a `TypeError` once the turn takes no more calls.
   */
  add(call: ToolCall): Promise<ToolResult>
  /** No more calls: the turn is over when the calls it has are. Idempotent. */
  end(): void
  /** As aborting `execute`'s signal: running and waiting calls end as `cancelled`, and the turn takes no more. */
  cancel(reason?: unknown): void
  /** Whether the turn still takes calls (not ended, cancelled, past its time limit, or closed). */
  readonly open: boolean
  /**
   * One result per added call, in the order added, once the turn is over; then one for each call a tapped stream
   * completed after the turn took its last (ended, cancelled, past its limit), `cancelled` and not run.
   */
  readonly results: Promise<ToolResult[]>
  /**
   * Reads a provider's stream (the SDK's stream object, Bedrock's `ConverseStream` response, or any async
   * iterable of its events), yielding every event unchanged and adding each tool call the moment its arguments
   * are complete; the turn ends with the stream. A call the stream ends inside is answered `invalid_arguments`,
   * never run. An error of the stream reaches the reader after the calls it completed were added.
   */
  tap<E>(stream: AsyncIterable<E> | Iterable<E> | { stream?: AsyncIterable<E> }, format: StreamFormat): AsyncGenerator<E, void, undefined>
}

export type ResultFormat = 'anthropic' | 'openai-responses' | 'openai-chat' | 'ai-sdk' | 'gemini' | 'bedrock'

/** The image types the Anthropic API takes (`Base64ImageSource['media_type']` in `@anthropic-ai/sdk`). */
export type AnthropicImageMediaType = 'image/jpeg' | 'image/png' | 'image/gif' | 'image/webp'
/** A `tool_result` block (`ToolResultBlockParam` in `@anthropic-ai/sdk`). */
export interface AnthropicToolResultBlock {
  type: 'tool_result'
  tool_use_id: string
  /** Text, or text and then images when the result carries images. Images of other types than
   * `AnthropicImageMediaType` are left out: the API refuses them, and the text's "[image n: …]" line stands in. */
  content: string | ({ type: 'text'; text: string } | { type: 'image'; source: { type: 'base64'; media_type: AnthropicImageMediaType; data: string } })[]
  is_error?: true
}
export interface AnthropicUserMessage {
  role: 'user'
  content: AnthropicToolResultBlock[]
}
export interface OpenAIFunctionCallOutput {
  type: 'function_call_output'
  call_id: string
  output: string | ({ type: 'input_text'; text: string } | { type: 'input_image'; image_url: string })[]
}
export interface OpenAIChatToolMessage {
  role: 'tool'
  tool_call_id: string
  content: string
}
/** An AI SDK major (the `ai` package's major version). */
export type AISDKVersion = 5 | 6 | 7
/**
 * An image in a tool result's `content` output, as each AI SDK major takes it. 5 knows only `media` (anything
 * else fails its message validation); 6 takes `image-data` (it still maps its deprecated `media`); 7 takes `file`
 * (its providers drop `media`, and `image-data` is deprecated there).
 */
export interface AISDKImageParts {
  5: { type: 'media'; data: string; mediaType: string }
  6: { type: 'image-data'; data: string; mediaType: string }
  7: { type: 'file'; mediaType: string; data: { type: 'data'; data: string } }
}
/** A tool-result part (`ToolResultPart` of AI SDK major `V`). */
export interface AISDKToolResultPart<V extends AISDKVersion = 7> {
  type: 'tool-result'
  toolCallId: string
  toolName: string
  output:
    | { type: 'text' | 'error-text'; value: string }
    | { type: 'content'; value: ({ type: 'text'; text: string } | AISDKImageParts[V])[] }
}
/** A tool message (`ToolModelMessage` of AI SDK major `V`). */
export interface AISDKToolMessage<V extends AISDKVersion = 7> {
  role: 'tool'
  content: AISDKToolResultPart<V>[]
}
export interface AISDKFormatOptions<V extends AISDKVersion = AISDKVersion> {
  /** The AI SDK major the message is for (default 7). Only results with images differ between majors. */
  version?: V
}

/** The image types Gemini takes in a function response (Gemini 3 and later). */
export type GeminiImageMediaType = 'image/png' | 'image/jpeg' | 'image/webp'
/** A `functionResponse` part (`FunctionResponse` of `@google/genai`). */
export interface GeminiFunctionResponsePart {
  functionResponse: {
    name: string
    /** The call's id, or the one generated for it. */
    id: string
    /** `output`: the structure itself when the text is exactly its JSON, else the text; `error`: "Error (kind): …". */
    response: { output: unknown } | { error: string }
    /** The result's images of `GeminiImageMediaType`, unless `images: false`. */
    parts?: { inlineData: { mimeType: GeminiImageMediaType; data: string } }[]
  }
}
/** One Gemini `Content` of the user role holding every result. */
export interface GeminiFunctionResponseContent {
  role: 'user'
  parts: GeminiFunctionResponsePart[]
}
export interface GeminiFormatOptions {
  /** false: no images in function responses, for models before Gemini 3, which take none (default true; the
   * text's "[image n: …]" lines stay either way). */
  images?: boolean
}
/** Bedrock Converse's image formats (`ImageFormat`). */
export type BedrockImageFormat = 'png' | 'jpeg' | 'gif' | 'webp'
/** A `toolResult` content block (`ToolResultContentBlock`). */
export type BedrockToolResultContent =
  | { text: string }
  | { json: { [key: string]: BedrockDocument } }
  | { image: { format: BedrockImageFormat; source: { bytes: Uint8Array } } }
/** A `toolResult` block (`ContentBlock.ToolResultMember`). */
export interface BedrockToolResultBlock {
  toolResult: {
    toolUseId: string
    /** `json` when the output is an object and the text is exactly its JSON, else the text; then the images. */
    content: BedrockToolResultContent[]
    status?: 'error'
  }
}
/** One Bedrock Converse user `Message` holding every result. */
export interface BedrockUserMessage {
  role: 'user'
  content: BedrockToolResultBlock[]
}

/** One Anthropic user message of `tool_result` blocks (failures carry `is_error: true`). */
export declare function formatResults(results: readonly ToolResult[], format: 'anthropic'): AnthropicUserMessage
/** OpenAI Responses `function_call_output` input items. */
export declare function formatResults(results: readonly ToolResult[], format: 'openai-responses'): OpenAIFunctionCallOutput[]
/** Chat Completions `tool` messages. */
export declare function formatResults(results: readonly ToolResult[], format: 'openai-chat'): OpenAIChatToolMessage[]
/**
 * One AI SDK tool message of tool-result parts, for `messages` of `generateText`/`streamText`. Failures are
 * `error-text`; a result with images is `content` of text and image parts, written for AI SDK major `version`
 * (default 7; pass `{ version: 5 }` or `{ version: 6 }` for those: no one image part works in all three).
 */
export declare function formatResults<V extends AISDKVersion = 7>(
  results: readonly ToolResult[],
  format: 'ai-sdk',
  options?: AISDKFormatOptions<V>,
): AISDKToolMessage<V>

/** One Gemini user content of `functionResponse` parts, for `contents` of `generateContent`. */
export declare function formatResults(results: readonly ToolResult[], format: 'gemini', options?: GeminiFormatOptions): GeminiFunctionResponseContent
/** One Bedrock Converse user message of `toolResult` blocks (failures carry `status: 'error'`). */
export declare function formatResults(results: readonly ToolResult[], format: 'bedrock'): BedrockUserMessage

/** The text a model should read for one result. */
export declare function forLlm(result: ToolResult): string

/** A turn's results as a self-contained HTML page: one bar per call, split into queued, checking, waiting for
 * approval, waiting for a token, running, retrying and cached, coloured by outcome (needs `metadata.timings`, so
 * run with `trace: true`; without them each bar is queued then running). */
export declare function renderTimeline(results: readonly ToolResult[], options?: { title?: string }): string
