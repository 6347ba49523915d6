'use strict'
// What the testing kit buys a suite: 20 scenarios of limits, retries, rate limits, TTLs, approvals and turn deadlines
// on toolgate/testing's manual clock, each checking its outcome, run one after another as a test file would: once
// cold, then `runs` times (default 21). Run by hand: node bench/testing.js [runs]. Prints the real wall time of the
// whole suite and the clock time it covers, for bench/RESULTS.md; exits 1 when any scenario gives the wrong result.

const assert = require('node:assert/strict')
const { ToolExecutor, RetryableError } = require('..')
const { manualClock, expectResult, flaky, hangs, huge, ok, progressThenSilence, slow } = require('toolgate/testing')

const RUNS = Number(process.argv[2] ?? 21)
if (!(Number.isInteger(RUNS) && RUNS >= 1)) throw new TypeError(`usage: node bench/testing.js [runs ≥ 1]; got ${process.argv[2]}`)
const SECOND = 1_000
const MINUTE = 60 * SECOND
const HOUR = 60 * MINUTE

/** A turn under way: `results` stays undefined until it resolves. */
function start(gate, calls, options) {
  const turn = { results: undefined }
  turn.done = gate.execute(calls, options).then((results) => (turn.results = results))
  return turn
}

/** Asserts that `turn` is still running at this moment of the clock. */
function stillRunning(turn, clock) {
  assert.equal(turn.results, undefined, `the turn had already ended at ${clock.now()} ms on the clock`)
}

/** One call of tool `name`; its result. */
const one = async (gate, name, input, options) => (await gate.execute([{ name, input }], options))[0]

/** A handler that hangs (until its signal aborts) on its first `n` attempts, then answers `value`. */
function hangsFor(n, value) {
  const stall = hangs()
  return (args, ctx) => (ctx.attempt <= n ? stall(args, ctx) : value)
}

/**
 * Each scenario gets a fresh manual clock and `open(tools, options)`, which makes a gate on that clock with `tools`
 * registered. It moves the clock as a test would and throws when an outcome is wrong.
 */
const SCENARIOS = {
  async 'a 30 s limit, no retry'(clock, open) {
    const gate = open([{ name: 'fetch', timeoutMs: 30 * SECOND, handler: hangs() }])
    const turn = start(gate, [{ name: 'fetch' }])
    await clock.advance(30 * SECOND - 1)
    stillRunning(turn, clock)
    await clock.advance(1)
    expectResult((await turn.done)[0]).toFailWith('timeout', 'time limit of 30000 ms').toHaveRetried(0)
  },

  async 'a 30 s limit, two retries on timeout'(clock, open) {
    const retry = { maxRetries: 2, initialDelayMs: SECOND, onTimeout: true }
    const gate = open([{ name: 'fetch', readOnly: true, timeoutMs: 30 * SECOND, retry, handler: hangs() }])
    const turn = start(gate, [{ name: 'fetch' }])
    await clock.advance(90 * SECOND - 1) // three limits take 90 s at least
    stillRunning(turn, clock)
    await clock.advance(5 * SECOND + 1) // and the backoffs below 1 s and 2 s
    const [result] = await turn.done
    expectResult(result).toFailWith('timeout').toHaveRetried(2)
    assert.deepEqual(result.metadata.attemptErrors.map((e) => e.errorKind), ['timeout', 'timeout'])
  },

  async 'hangs twice at 30 s, answers on the third attempt'(clock, open) {
    const retry = { maxRetries: 2, initialDelayMs: SECOND, onTimeout: true }
    const gate = open([{ name: 'search', readOnly: true, timeoutMs: 30 * SECOND, retry, handler: hangsFor(2, 'found') }])
    const turn = start(gate, [{ name: 'search' }])
    await clock.advance(95 * SECOND)
    expectResult((await turn.done)[0]).toSucceed('found').toHaveRetried(2)
  },

  async 'exponential backoff: three transient failures, then success'(clock, open) {
    const handler = flaky(3, undefined, 'stored')
    const gate = open([{ name: 'save', retry: { maxRetries: 3, initialDelayMs: 2 * SECOND, backoffFactor: 2 }, handler }])
    const turn = start(gate, [{ name: 'save' }])
    await clock.advance(14 * SECOND) // backoffs below 2, 4 and 8 s
    expectResult((await turn.done)[0]).toSucceed('stored').toHaveRetried(3)
    assert.deepEqual(handler.calls.map((c) => c.attempt), [1, 2, 3, 4])
  },

  async 'a Retry-After of 60 s is waited out'(clock, open) {
    const handler = flaky(1, new RetryableError('429 Too Many Requests', { retryAfterMs: MINUTE }), '42.17')
    const gate = open([{ name: 'quote', readOnly: true, retry: { maxRetries: 1, initialDelayMs: 100 }, handler }])
    const turn = start(gate, [{ name: 'quote' }])
    await clock.advance(MINUTE - 1)
    assert.equal(handler.calls.length, 1, 'retried before its Retry-After')
    await clock.advance(1)
    expectResult((await turn.done)[0]).toSucceed('42.17').toHaveRetried(1)
  },

  async 'maxElapsedMs stops the retries of a 20 s limit'(clock, open) {
    const retry = { maxRetries: 5, initialDelayMs: SECOND, maxElapsedMs: 45 * SECOND, onTimeout: true }
    const gate = open([{ name: 'crawl', readOnly: true, timeoutMs: 20 * SECOND, retry, handler: hangs() }])
    const turn = start(gate, [{ name: 'crawl' }])
    await clock.advance(65 * SECOND) // a fourth attempt would start after 60 s: past 45 s from the first
    expectResult((await turn.done)[0]).toFailWith('timeout').toHaveRetried(2)
  },

  async 'an idle limit of 15 s after four progress reports'(clock, open) {
    const handler = progressThenSilence(4, { everyMs: 10 * SECOND, clock })
    const gate = open([{ name: 'export', timeoutMs: 10 * MINUTE, idleTimeoutMs: 15 * SECOND, handler }])
    const turn = start(gate, [{ name: 'export' }])
    await clock.advance(45 * SECOND - 1) // reports at 0, 10, 20 and 30 s, then silence
    stillRunning(turn, clock)
    await clock.advance(1)
    expectResult((await turn.done)[0]).toFailWith('idle_timeout', 'reported no progress for 15000 ms')
  },

  async 'progress keeps the idle limit off; the total limit still ends it'(clock, open) {
    const handler = progressThenSilence(1_000, { everyMs: 5 * SECOND, clock })
    const gate = open([{ name: 'stream', timeoutMs: MINUTE, idleTimeoutMs: 10 * SECOND, handler }])
    const turn = start(gate, [{ name: 'stream' }])
    await clock.advance(MINUTE)
    expectResult((await turn.done)[0]).toFailWith('timeout', 'time limit of 60000 ms')
  },

  async 'a 25 s handler makes its 30 s limit'(clock, open) {
    const gate = open([{ name: 'render', timeoutMs: 30 * SECOND, handler: slow(25 * SECOND, 'rendered', { clock }) }])
    const turn = start(gate, [{ name: 'render' }])
    await clock.advance(25 * SECOND)
    expectResult((await turn.done)[0]).toSucceed('rendered')
  },

  async 'three reads at once with limits of 10, 20 and 30 s'(clock, open) {
    const gate = open([10, 20, 30].map((s) => ({ name: `read_${s}`, readOnly: true, timeoutMs: s * SECOND, handler: hangs() })))
    const turn = start(gate, [{ name: 'read_10' }, { name: 'read_20' }, { name: 'read_30' }])
    await clock.advance(30 * SECOND - 1)
    stillRunning(turn, clock)
    await clock.advance(1)
    const results = await turn.done
    results.forEach((r, i) => expectResult(r).toFailWith('timeout', `time limit of ${(i + 1) * 10_000} ms`))
  },

  async 'a rate limit of 2/min refuses the third call, then refills'(clock, open) {
    const gate = open([{ name: 'geocode', rateLimit: '2/min', handler: ok('38.72,-9.14') }])
    const [, , third] = await gate.execute([{ name: 'geocode' }, { name: 'geocode' }, { name: 'geocode' }])
    expectResult(third).toFailWith('rate_limited')
    assert.equal(third.retryAfterMs, 30 * SECOND)
    await clock.advance(30 * SECOND)
    expectResult(await one(gate, 'geocode')).toSucceed()
  },

  async 'four calls on 1/min wait three minutes for their tokens'(clock, open) {
    const gate = open([{ name: 'send_sms', rateLimit: { limit: '1/min', maxWaitMs: 5 * MINUTE }, handler: ok('sent') }])
    const turn = start(gate, Array.from({ length: 4 }, () => ({ name: 'send_sms' })))
    await clock.advance(3 * MINUTE - 1)
    stillRunning(turn, clock)
    await clock.advance(1)
    for (const r of await turn.done) expectResult(r).toSucceed('sent')
  },

  async 'an hourly quota past maxWaitMs is refused at once, and refills in an hour'(clock, open) {
    const gate = open([{ name: 'report', rateLimit: { limit: '1/hour', maxWaitMs: 10 * MINUTE }, handler: ok('done') }])
    const [first, second] = await gate.execute([{ name: 'report' }, { name: 'report' }])
    expectResult(first).toSucceed()
    expectResult(second).toFailWith('rate_limited')
    assert.equal(second.retryAfterMs, HOUR)
    await clock.advance(HOUR)
    expectResult(await one(gate, 'report')).toSucceed()
  },

  async 'a cached result lives 5 min'(clock, open) {
    const handler = ok('1 EUR = 1.09 USD')
    const gate = open([{ name: 'rates', readOnly: true, idempotent: true, cache: { ttlMs: 5 * MINUTE }, handler }])
    expectResult(await one(gate, 'rates', { base: 'EUR' })).toSucceed()
    await clock.advance(5 * MINUTE - 1)
    expectResult(await one(gate, 'rates', { base: 'EUR' })).toBeCached()
    await clock.advance(1)
    assert.equal((await one(gate, 'rates', { base: 'EUR' })).cached, false)
    assert.equal(handler.calls.length, 2)
  },

  async 'a session forgets its queries after 10 min without calls'(clock, open) {
    const gate = open([{ name: 'search', readOnly: true, handler: ok('hits') }], { dedup: { policy: 'refuse', sessionTtlMs: 10 * MINUTE } })
    const session = { context: { sessionId: 's_1' } }
    expectResult(await one(gate, 'search', { q: 'coats' }, session)).toSucceed()
    expectResult(await one(gate, 'search', { q: 'coats' }, session)).toFailWith('duplicate')
    await clock.advance(10 * MINUTE)
    expectResult(await one(gate, 'search', { q: 'coats' }, session)).toSucceed()
  },

  async 'an approval nobody gives is declined after 2 min'(clock, open) {
    const handler = ok('deployed')
    const gate = open([{ name: 'deploy', needsApproval: true, handler }], { approvalTimeoutMs: 2 * MINUTE, approve: () => new Promise(() => {}) })
    const turn = start(gate, [{ name: 'deploy' }])
    await clock.advance(2 * MINUTE - 1)
    stillRunning(turn, clock)
    await clock.advance(1)
    expectResult((await turn.done)[0]).toFailWith('approval_denied', 'no approval came within 120000 ms')
    assert.equal(handler.calls.length, 0)
  },

  async 'an approval given after 90 s lets the call run'(clock, open) {
    const approve = () => clock.sleep(90 * SECOND).then(() => true)
    const gate = open([{ name: 'deploy', needsApproval: true, handler: ok('deployed') }], { approvalTimeoutMs: 2 * MINUTE, approve })
    const turn = start(gate, [{ name: 'deploy' }])
    await clock.advance(90 * SECOND)
    expectResult((await turn.done)[0]).toSucceed('deployed')
  },

  async 'a 20 s turn deadline stops one write and skips the next'(clock, open) {
    const notify = ok('sent')
    const gate = open([{ name: 'migrate', timeoutMs: 10 * MINUTE, handler: hangs() }, { name: 'notify', handler: notify }])
    const turn = start(gate, [{ name: 'migrate' }, { name: 'notify' }], { deadlineMs: 20 * SECOND })
    await clock.advance(20 * SECOND)
    const [migrate, skipped] = await turn.done
    expectResult(migrate).toFailWith('timeout')
    expectResult(skipped).toFailWith('not_executed')
    assert.equal(notify.calls.length, 0)
  },

  async 'an argument check that never answers fails closed after 10 s'(clock, open) {
    const handler = ok('ran')
    const gate = open([{ name: 'transfer', check: () => new Promise(() => {}), handler }], { checkTimeoutMs: 10 * SECOND })
    const turn = start(gate, [{ name: 'transfer' }])
    await clock.advance(10 * SECOND)
    expectResult((await turn.done)[0]).toFailWith('handler_error', 'no check came within 10000 ms')
    assert.equal(handler.calls.length, 0)
  },

  async 'a spilled output can be read back for its 1 h TTL, not after'(clock, open) {
    const gate = open([{ name: 'dump_logs', handler: huge(100_000) }], { artifacts: { ttlMs: HOUR } })
    gate.registerArtifactTools()
    const dump = await one(gate, 'dump_logs')
    expectResult(dump).toBeTruncated()
    const read = () => one(gate, 'read_artifact', { path: dump.metadata.artifactPath, limit: 100 })
    expectResult(await read()).toSucceed(/A long line of tool output/)
    await clock.advance(HOUR + MINUTE) // past the TTL, and a sweep
    expectResult(await read()).toFailWith('handler_error', 'is not an artifact')
  },
}

/** Runs every scenario once, each on a fresh clock; returns the clock time they covered, in ms. */
async function runSuite() {
  let covered = 0
  for (const [name, scenario] of Object.entries(SCENARIOS)) {
    const clock = manualClock()
    const gates = []
    const open = (tools, options) => {
      const gate = new ToolExecutor({ clock, ...options })
      for (const tool of tools) gate.register(tool)
      gates.push(gate)
      return gate
    }
    try {
      await scenario(clock, open)
    } catch (error) {
      throw new Error(`scenario "${name}" gave the wrong result`, { cause: error })
    } finally {
      await Promise.all(gates.map((gate) => gate.close({ timeoutMs: 100 })))
    }
    covered += clock.now()
  }
  return covered
}

const sorted = (xs) => [...xs].sort((a, b) => a - b)
const percentile = (xs, p) => sorted(xs)[Math.ceil((xs.length - 1) * p)]

async function main() {
  const walls = []
  let covered
  for (let run = 0; run <= RUNS; run++) {
    const t0 = performance.now()
    covered = await runSuite()
    walls.push(performance.now() - t0)
  }
  const [cold, ...warm] = walls
  const count = Object.keys(SCENARIOS).length
  console.log(`${count} scenarios covering ${(covered / MINUTE).toFixed(0)} min of clock time (${Math.round(covered)} ms)`)
  console.log('| suite of scenarios | runs | wall ms, median | wall ms, p90 | first run, ms |')
  console.log('|---|---|---|---|---|')
  console.log(`| ${count} on the manual clock | ${warm.length} | ${percentile(warm, 0.5).toFixed(1)} | ${percentile(warm, 0.9).toFixed(1)} | ${cold.toFixed(1)} |`)
}

main().catch((error) => {
  console.error(error)
  process.exit(1)
})
