// Limits of seconds and minutes, tested in milliseconds: the gate's deadlines on a clock the test moves.
const test = require('ava')
const { ToolExecutor } = require('toolgate')
const { expectResult, hangs, manualClock, ok, progressThenSilence } = require('toolgate/testing')

/** A gate on a fresh manual clock, closed after the test, with `tools` registered. */
function gateOnClock(t, tools, options) {
  const clock = manualClock()
  const gate = new ToolExecutor({ clock, ...options })
  for (const tool of tools) gate.register(tool)
  t.teardown(() => gate.close({ timeoutMs: 100 }))
  return { clock, gate }
}

/** A turn under way, and what it has resolved to so far (undefined while it runs). */
function start(gate, calls, options) {
  const turn = { results: undefined }
  turn.done = gate.execute(calls, options).then((results) => (turn.results = results))
  return turn
}

test('a 30 s timeout with two retries: three limits and two backoffs, all on the clock', async (t) => {
  const search = hangs()
  const { clock, gate } = gateOnClock(t, [
    { name: 'search', readOnly: true, timeoutMs: 30_000, retry: { maxRetries: 2, initialDelayMs: 1_000, onTimeout: true }, handler: search },
  ])
  const turn = start(gate, [{ name: 'search', input: { q: 'flights to Lisbon' } }])

  await clock.advance(60_000) // three limits take 90 s at least
  t.is(turn.results, undefined)
  await clock.advance(35_000)
  const [result] = await turn.done

  expectResult(result).toFailWith('timeout', 'time limit of 30000 ms').toHaveRetried(2)
  t.deepEqual(result.metadata.attemptErrors.map((e) => e.errorKind), ['timeout', 'timeout'])
  t.is(search.calls.length, 3)
})

test('an idle limit counts from the last progress report, on the clock', async (t) => {
  const { clock, gate } = gateOnClock(t, [])
  const crawl = progressThenSilence(3, { everyMs: 8_000, clock })
  gate.register({ name: 'crawl', readOnly: true, timeoutMs: 300_000, idleTimeoutMs: 10_000, handler: crawl })
  const turn = start(gate, [{ name: 'crawl' }])

  await clock.advance(16_000 + 9_999) // reports at 0, 8 and 16 s, then silence short of 10 s
  t.is(turn.results, undefined)
  await clock.advance(1)
  const [result] = await turn.done

  expectResult(result).toFailWith('idle_timeout', 'reported no progress for 10000 ms')
  t.true(crawl.calls[0].signalAborted)
})

test('an approval nobody gives is declined after the approval timeout', async (t) => {
  const deploy = ok('deployed')
  const { clock, gate } = gateOnClock(t, [{ name: 'deploy', needsApproval: true, handler: deploy }], {
    approvalTimeoutMs: 120_000,
    approve: () => new Promise(() => {}), // the reviewer never answers
  })
  const turn = start(gate, [{ name: 'deploy' }])

  await clock.advance(120_000)
  const [result] = await turn.done

  expectResult(result).toFailWith('approval_denied', 'no approval came within 120000 ms')
  t.is(deploy.calls.length, 0)
})

test('a turn deadline stops what runs and skips what has not started', async (t) => {
  const [migrateHandler, notifyHandler] = [hangs(), ok('sent')]
  const { clock, gate } = gateOnClock(t, [
    { name: 'migrate', timeoutMs: 600_000, handler: migrateHandler },
    { name: 'notify', handler: notifyHandler },
  ])
  const turn = start(gate, [{ name: 'migrate' }, { name: 'notify' }], { deadlineMs: 45_000 })

  await clock.advance(45_000)
  const [migrate, notify] = await turn.done

  expectResult(migrate).toFailWith('timeout')
  expectResult(notify).toFailWith('not_executed') // two calls that change state run one after the other
  t.true(migrateHandler.calls[0].signalAborted)
  t.is(notifyHandler.calls.length, 0)
})

test('a cached result expires with its TTL on the clock', async (t) => {
  const rates = ok('1 EUR = 1.09 USD')
  const { clock, gate } = gateOnClock(t, [{ name: 'rates', readOnly: true, idempotent: true, cache: { ttlMs: 300_000 }, handler: rates }])
  const ask = async () => (await gate.execute([{ name: 'rates', input: { base: 'EUR' } }]))[0]

  expectResult(await ask()).toSucceed()
  await clock.advance(299_999)
  expectResult(await ask()).toBeCached()
  await clock.advance(1)
  t.false((await ask()).cached)
  t.is(rates.calls.length, 2)
})
