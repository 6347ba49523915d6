// Compiled with `tsc --noEmit` in `npm test`: the public types as a user writes against them.
// `@ts-expect-error` lines must stay errors, so the types also refuse what they should.

import { ToolExecutor, RetryableError, formatResults, forLlm, renderTimeline, ERROR_KINDS, RECORDING_VERSION } from '../..'
import type { ErrorKind, ToolCall, ToolResult, ToolContext, ExecutionContext, AnthropicTool, RecordedTurn } from '../..'

interface AppContext extends ExecutionContext {
  userId: string
}

const gate = new ToolExecutor<AppContext>({ defaultTimeoutMs: 5_000, concurrency: 4, maxOutputChars: 20_000 })

gate.register<{ query: string; limit?: number }>({
  name: 'web_search',
  description: 'Search the web',
  parameters: { type: 'object', properties: { query: { type: 'string' }, limit: { type: 'integer' } }, required: ['query'] },
  readOnly: true,
  handler: async (args, ctx: ToolContext<AppContext>) => {
    const q: string = args.query
    const user: string | undefined = ctx.context?.userId
    ctx.signal.throwIfAborted()
    return { q, user, id: ctx.callId, tool: ctx.toolName }
  },
})

gate.register({ name: 'write_file', handler: () => undefined, timeoutMs: 1_000, needsApproval: true, replace: true })

// @ts-expect-error a tool needs a handler
gate.register({ name: 'no_handler' })

const anthropicTools: AnthropicTool[] = gate.definitions('anthropic')
const responsesTools = gate.definitions('openai-responses', { context: { userId: 'u', allowedTools: ['web_*'] } })
const chatTools = gate.definitions('openai-chat')
const aiSdkRecord = gate.definitions('ai-sdk', { jsonSchema: (s) => ({ wrapped: s }) })
const aiSdkTools = gate.definitions('ai-sdk')
void [anthropicTools, responsesTools[0].parameters, chatTools[0].function.name, aiSdkRecord['web_search'].inputSchema.wrapped, aiSdkTools[0].inputSchema]

const calls: ToolCall[] = [
  { type: 'tool_use', id: 'toolu_1', name: 'web_search', input: { query: 'rust' } },
  { type: 'function_call', call_id: 'call_1', name: 'web_search', arguments: '{"query":"napi"}' },
  { id: 'call_2', type: 'function', function: { name: 'web_search', arguments: '' } },
  { type: 'tool-call', toolCallId: 't3', toolName: 'web_search', input: {} },
  { name: 'web_search', arguments: { query: 'x' } },
]

async function turn(): Promise<void> {
  const controller = new AbortController()
  const results: ToolResult[] = await gate.execute(calls, { signal: controller.signal, context: { userId: 'u1', deniedTools: ['write_*'] } })
  for (const r of results) {
    const kind: ErrorKind | undefined = r.errorKind
    const text: string = forLlm(r)
    const stations: string[] = r.metadata.stages.map((m) => m.split(':')[0])
    void [kind, text, stations, r.latencyMs, r.retryable, r.metadata.structured]
  }
  const anthropic = formatResults(results, 'anthropic')
  const blocks: 'tool_result'[] = anthropic.content.map((b) => b.type)
  const responses = formatResults(results, 'openai-responses')
  const chat = formatResults(results, 'openai-chat')
  const aiSdk = formatResults(results, 'ai-sdk')
  void [blocks, responses[0].call_id, chat[0].tool_call_id, aiSdk.content[0].output.type, gate.running, gate.list()[0].readOnly]
  // @ts-expect-error results cannot be formatted for an unknown provider
  formatResults(results, 'vertex')
}

const kinds: readonly ErrorKind[] = ERROR_KINDS
void [turn, kinds, gate.unregister('write_file')]

// Time and failure: retry policies, idle limits, progress, turn policies, lifecycle.
const timed = new ToolExecutor({ retry: { maxRetries: 3, initialDelayMs: 200 }, onProgress: (e) => void e.info, onTrace: (events) => void events.map((e) => (e.type === 'late_settlement' ? e.afterMs : e.at)) })
timed.register({
  name: 'crawl',
  readOnly: true,
  idleTimeoutMs: 2_000,
  maxConcurrency: 1,
  retry: { maxRetries: 1, onTimeout: true },
  handler: async (_args: Record<string, unknown>, ctx) => {
    ctx.progress({ pages: 1 })
    if (ctx.attempt === 1) throw new RetryableError('busy', { retryAfterMs: 500 })
    return 'done'
  },
})
timed.register({ name: 'send_mail', retry: false, handler: () => 'sent' })
async function timedTurn(): Promise<void> {
  const results = await timed.execute([{ name: 'crawl' }], { deadlineMs: 10_000, stopOnError: true, onProgress: (e) => void e.callId })
  const retried: number | undefined = results[0].metadata.attemptErrors?.[0].retryInMs
  const pending: ('running' | 'abandoned')[] = timed.pendingHandlers().map((h) => h.state)
  const late: number = timed.stats().total.lateSettlements
  const { stillRunning } = await timed.close({ timeoutMs: 1_000 })
  void [retried, pending, late, stillRunning.length, results[0].retryAfterMs]
}
void timedTurn

// Avoided and bounded work: cache, dedup, rate limits.
const bounded = new ToolExecutor({ cache: { maxEntries: 500, ttlMs: 30_000 }, dedup: { policy: 'refuse' }, rateLimit: '100/min' })
bounded.register({ name: 'lookup', idempotent: true, readOnly: true, cache: { ttlMs: 5_000, scope: 'tenantId' }, dedup: { policy: 'reuse', keys: ['q'] }, rateLimit: { limit: '5/s', key: 'userId', maxWaitMs: 1_000 }, handler: () => 'x' })
bounded.register({ name: 'charge', rateLimit: { capacity: 3, refillPerSecond: 0.5 }, cache: false, dedup: 'off', handler: () => 'ok' })
// @ts-expect-error a rate is N per a known unit
bounded.register({ name: 'bad', rateLimit: '10/fortnight', handler: () => 'x' })
async function boundedTurn(): Promise<void> {
  const [r] = await bounded.execute([{ name: 'lookup', input: { q: 'x' } }], { context: { sessionId: 's1', userId: 'u1', tenantId: 't1' } })
  const flags: [boolean, true | undefined, number | undefined] = [r.cached, r.metadata.sharedFlight, r.metadata.repeats]
  const dropped: number = await bounded.invalidate('lookup', { q: 'x' })
  bounded.clearCache()
  void [flags, dropped, bounded.stats().tools['lookup']?.cacheHits]
}
void boundedTurn

// Circuit breakers and budgets.
const budgeted = new ToolExecutor({ breaker: { failureRate: 0.5, minCalls: 10 }, budget: { maxCallsPerTurn: 20, maxCallsPerWindow: { calls: 100, windowMs: 60_000 } } })
budgeted.register({
  name: 'render',
  parameters: { type: 'object', properties: { pages: { type: 'integer' } }, required: ['pages'] },
  cost: ({ pages }) => pages * 2,
  budget: { maxCalls: 5, by: ['tenantId', 'userId'] },
  breaker: false,
  handler: ({ pages }) => `${pages}`,
})
budgeted.register({ name: 'flat', cost: 3, breaker: true, handler: () => 'ok' })
// @ts-expect-error a cost is a number or a function of the arguments
budgeted.register({ name: 'priced', cost: 'cheap', handler: () => 'x' })
// @ts-expect-error the cost function reads the arguments the schema declares
budgeted.register({ name: 'typo', parameters: { type: 'object', properties: { pages: { type: 'integer' } } }, cost: ({ page }) => page, handler: () => 'x' })
async function budgetedTurn(): Promise<void> {
  const [r] = await budgeted.execute([{ name: 'flat' }], { context: { sessionId: 's', budget: { maxCost: 10 } } })
  if (r.errorKind === 'budget_exceeded') {
    const used: number | undefined = r.metadata.budget?.used
    const which: 'maxCallsPerTurn' | 'maxCalls' | 'maxCallsPerWindow' | 'maxCost' | undefined = r.metadata.budget?.budget
    void [used, which]
  }
  const state: 'closed' | 'open' | 'half_open' | undefined = budgeted.stats().tools['flat']?.breaker
  const opened: number | undefined = budgeted.stats().tools['flat']?.breakerOpened
  void [state, opened]
}
void budgetedTurn
new ToolExecutor({ onTrace: (events) => events.forEach((e) => e.type === 'breaker' && console.log(e.toolName, e.from, e.to)) })

// Shaping, repair and judge options.
const shaped = new ToolExecutor({
  previewChars: 1_000,
  redact: { patterns: ['TICKET-[0-9]+', { name: 'ticket', pattern: 'T-[0-9]+' }], env: ['DB_URL'], emails: true },
  artifacts: { dir: '/tmp/artifacts', maxBytes: 1 << 20, ttlMs: 60_000 },
  repair: { toolNames: true, note: false },
  maxConsecutiveRollbacks: 2,
})
shaped.registerArtifactTools().register({
  name: 'fetch_page',
  untrusted: true,
  aliases: { u: 'url' },
  parameters: { type: 'object', properties: { url: { type: 'string' } } },
  rollbackWhen: [{ startsWith: 'ERROR' }, { emptyAt: '/items' }],
  handler: () => '',
})
shaped.register({ name: 'judged', rollbackWhen: (value) => value === '' && 'empty', handler: () => '' })
new ToolExecutor({ redact: false, repair: false })
// @ts-expect-error a rollback rule has one of the known keys
shaped.register({ name: 'bad_rule', rollbackWhen: { emptyish: '/x' }, handler: () => '' })
async function shapedTurn(): Promise<void> {
  const [r] = await shaped.execute([{ name: 'fetch_page', input: { url: 'https://example.com' } }])
  const reason: string | undefined = r.rollback?.reason
  const rules: string[] | undefined = r.metadata.repairs?.map((x) => x.rule)
  const saved: string | undefined = r.metadata.artifactPath
  const counts: Record<string, number> | undefined = r.metadata.redactions
  const images = r.metadata.images?.map((i) => i.mediaType)
  void [reason, rules, saved, counts, images]
}
void shapedTurn

// Permissions, approvals and business checks.
const guarded = new ToolExecutor<AppContext>({
  permissions: { mode: 'default', deny: [{ tool: 'shell', args: { command: 'rm *' }, reason: 'no deletions' }], ask: ['deploy'], allow: ['read_*'] },
  approve: async (request) => (request.toolName === 'deploy' ? { decision: 'deny', reason: `not now (${request.rule})` } : true),
  approvalTimeoutMs: 30_000,
  checkTimeoutMs: 5_000,
})
guarded.register<{ path: string }>({
  name: 'read_file',
  risk: 'read',
  pathWithin: { arg: 'path', root: '/srv/data' },
  check: async (args) => (args.path.endsWith('.key') ? 'key files are off limits' : undefined),
  handler: () => '',
})
guarded.register({ name: 'fetch', urlHosts: [{ arg: 'url', hosts: ['*.example.com'] }], handler: () => '' })
// @ts-expect-error risk levels are a closed set
guarded.register({ name: 'bad_risk', risk: 'huge', handler: () => '' })
// @ts-expect-error a mode is one of the four
new ToolExecutor({ permissions: { mode: 'yolo' } })
void guarded.execute([{ name: 'read_file', input: { path: 'a' } }], { context: { userId: 'u', maxRisk: 'write', permissions: { deny: ['fetch'] } } })
  .then(([r]) => r.metadata.permission?.by)

// Observability.
const watched = new ToolExecutor({
  onTrace: (events) => events.forEach((e) => (e.type === 'station' ? e.station : e.type === 'late_settlement' ? e.endedBy : e.type === 'breaker' ? e.to : e.error)),
  audit: { file: '/tmp/audit.jsonl', maxBytes: 1 << 20, keep: 3, onRecord: (r) => void r.args },
  otel: false,
  trace: true,
})
const p95: number | null = watched.stats().tools['x']?.latencyMs.p95 ?? null
const text: string = watched.prometheus()
const health: 'ok' | 'degraded' | 'failing' = watched.healthReport().status
void [p95, text, health]
void watched.execute([]).then((results) => renderTimeline(results, { title: 'turn' }).length)

// Recording turns.
const recorded: RecordedTurn[] = []
const recording = new ToolExecutor({ record: { to: (entry) => recorded.push(entry), sample: 0.1, include: ['plan'] } })
new ToolExecutor({ record: { to: '/tmp/turns.jsonl', maxBytes: 1 << 26, keep: 2 } })
const failedRecords: number | undefined = recording.stats().recording?.failed
void [failedRecords, RECORDING_VERSION === 1, recorded[0]?.runs.map((run) => (run.outcome === 'threw' ? run.error : run.outcome === 'returned' ? run.value : run.durationMs))]
// @ts-expect-error a recording goes to a file or a function
new ToolExecutor({ record: { to: 3 } })

// Streaming turns.
const streaming = gate.turn({ context: { userId: 'u' }, deadlineMs: 30_000, stopOnError: true })
const added: Promise<ToolResult> = streaming.add({ id: 'c1', name: 'web_search', arguments: '{"query": "x"}' })
void added.then((r) => r.success)
streaming.end()
streaming.cancel('stopped')
const stillTakes: boolean = streaming.open
void streaming.results.then((all: ToolResult[]) => all.length)
void (async () => {
  for await (const settled of streaming) void settled.callId
  async function* events() {
    yield { type: 'message_stop' as const }
  }
  for await (const event of streaming.tap(events(), 'anthropic')) void event.type
  for await (const event of streaming.tap({ stream: events() }, 'bedrock')) void event.type
  // @ts-expect-error a stream format is one of the five providers'
  streaming.tap(events(), 'ai-sdk')
  // @ts-expect-error turn options are execute()'s
  gate.turn({ deadline: 5 })
})()
void stillTakes

// devtools: one gate or several; watch with approvals; inspect
import { devtools } from 'toolgate/devtools'
import type { Devtools, DevtoolsOptions } from 'toolgate/devtools'
import type { GateInspection, WatchedApproval } from '../..'
async function devtoolsTypes(a: ToolExecutor, b: ToolExecutor) {
  const options: DevtoolsOptions = { port: 0, host: '127.0.0.1', approvals: true, keepTurns: 50 }
  const one: Devtools = await devtools(a, options)
  const both = await devtools([a, b])
  const url: string = one.url
  await both.close()
  // @ts-expect-error keepTurns is a number
  await devtools(a, { keepTurns: '10' })
  const stop = a.watch(() => {}, { approve: (request: WatchedApproval) => (request.toolName === 'deploy' && !request.signal.aborted ? { decision: 'approve' as const } : 'deny') })
  stop()
  const seen: GateInspection = a.inspect({ limit: 10 })
  const state: 'closed' | 'open' | 'half_open' | undefined = seen.breakers.x?.state
  const buckets: number | undefined = seen.memory?.buckets[0]?.tokens
  return [url, state, buckets]
}
void devtoolsTypes
