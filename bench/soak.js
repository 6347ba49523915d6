'use strict'
// A soak: 1,000,000 calls through one executor, mixing what makes memory grow when a bound is missing: a fresh
// session and a fresh rate-limit key (user) every turn, cached and deduplicated queries, handlers that hang past
// their limit and never settle, and outputs spilled to artifacts. Run by hand after `npm run build`:
// node --expose-gc bench/soak.js [calls]. Prints RSS along the way and a Markdown table for bench/RESULTS.md;
// exits 1 when RSS grows past the bound after the warm-up.

const { ToolExecutor } = require('..')

const CALLS = Number(process.argv[2] ?? 1_000_000)
const PER_TURN = 10
const TURNS_AT_ONCE = 20
/** RSS may not grow more than this after the first tenth of the calls (the warm-up: JIT, caches filling). */
const BOUND_MB = 64
const MB = 2 ** 20

const gate = new ToolExecutor({
  maxOutputChars: 1_000,
  cache: { maxEntries: 1_000 },
  dedup: { maxSessions: 10_000 },
  artifacts: { maxBytes: 16 * MB },
})
const schema = { type: 'object', properties: { q: { type: 'string' } } }
const page = 'a line of a long page of text, '.repeat(100)
gate.register({ name: 'search', readOnly: true, idempotent: true, parameters: schema, rateLimit: { limit: '1000/s', key: 'userId' }, handler: ({ q }) => ({ q, hits: [q, q.length] }) })
gate.register({ name: 'write', parameters: schema, handler: ({ q }) => `wrote ${q}` })
gate.register({ name: 'hang', readOnly: true, timeoutMs: 5, parameters: schema, handler: () => new Promise(() => {}) })
gate.register({ name: 'page', readOnly: true, parameters: schema, handler: () => page })

const gc = () => (global.gc ? global.gc() : undefined)
const rss = () => process.memoryUsage().rss

/** One turn's calls: mostly searches (one in ten repeats a query), a write, now and then a hang or a spill. */
function turn(t) {
  const calls = []
  for (let i = 0; i < PER_TURN; i++) {
    const n = t * PER_TURN + i
    const name = n % 100 === 7 ? 'hang' : n % 50 === 3 ? 'page' : n % 10 === 9 ? 'write' : 'search'
    calls.push({ type: 'function_call', call_id: `c${n}`, name, arguments: JSON.stringify({ q: `query ${n % 10 === 0 ? 'repeat' : n}` }) })
  }
  return calls
}

async function main() {
  const turns = Math.ceil(CALLS / PER_TURN)
  const samples = []
  let warm
  const started = Date.now()
  for (let t = 0; t < turns; t += TURNS_AT_ONCE) {
    const batch = []
    for (let k = t; k < Math.min(turns, t + TURNS_AT_ONCE); k++) {
      batch.push(gate.execute(turn(k), { context: { sessionId: `s${k}`, userId: `u${k}`, tenantId: `t${k % 7}` } }))
    }
    await Promise.all(batch)
    const done = (t + TURNS_AT_ONCE) * PER_TURN
    if (done % (CALLS / 10) < TURNS_AT_ONCE * PER_TURN) {
      gc()
      const mb = rss() / MB
      samples.push([done, mb])
      if (warm === undefined) warm = mb
      process.stderr.write(`soak: ${done} calls, RSS ${mb.toFixed(0)} MB\n`)
    }
  }
  const seconds = (Date.now() - started) / 1000
  await gate.close({ timeoutMs: 50 })
  gc()
  const after = rss() / MB
  const peak = Math.max(...samples.map(([, mb]) => mb))
  const growth = peak - warm
  const stats = gate.stats().total
  console.log([
    `| calls | seconds | RSS after the warm-up (${samples[0][0]} calls) | peak RSS | growth past the warm-up | after close() | bound |`,
    '|---|---|---|---|---|---|---|',
    `| ${CALLS.toLocaleString('en-US')} | ${seconds.toFixed(0)} | ${warm.toFixed(0)} MB | ${peak.toFixed(0)} MB | ${growth.toFixed(0)} MB | ${after.toFixed(0)} MB | ${BOUND_MB} MB |`,
    '',
    `RSS every tenth: ${samples.map(([n, mb]) => `${(n / 1000).toFixed(0)}k ${mb.toFixed(0)}`).join(', ')} (MB).`,
    `Calls ${stats.calls}, timeouts ${stats.timeouts}, cache hits ${stats.cacheHits}, duplicates ${stats.duplicates}.`,
  ].join('\n'))
  process.exitCode = growth <= BOUND_MB ? 0 : 1
}

main()
