// Limits measured in seconds and minutes, tested in milliseconds: the gate's deadlines on a clock the test moves.
import { expect, onTestFinished, test } from 'vitest'
import { RetryableError, ToolExecutor } from 'toolgate'
import { flaky, hangs, manualClock, ok, toolgateMatchers } from 'toolgate/testing'

expect.extend(toolgateMatchers)

/** A gate on a fresh manual clock, closed when the test ends, with `tool` registered. */
function gateOnClock(tool) {
  const clock = manualClock()
  const gate = new ToolExecutor({ clock })
  gate.register(tool)
  onTestFinished(() => gate.close({ timeoutMs: 100 }))
  return { clock, gate }
}

/** A turn under way, and what it has resolved to so far (undefined while it runs). */
function start(gate, calls) {
  const turn = { results: undefined }
  turn.done = gate.execute(calls).then((results) => (turn.results = results))
  return turn
}

test('a 30 s timeout with two retries: three limits and two backoffs, all on the clock', async () => {
  const fetchPage = hangs()
  const { clock, gate } = gateOnClock({
    name: 'fetch_page',
    readOnly: true,
    timeoutMs: 30_000,
    retry: { maxRetries: 2, initialDelayMs: 1_000, onTimeout: true },
    handler: fetchPage,
  })
  const turn = start(gate, [{ name: 'fetch_page', input: { url: 'https://example.com' } }])

  await clock.advance(29_999)
  expect(turn.results).toBeUndefined()
  await clock.advance(65_001) // the other two limits, and backoffs below 1 s and 2 s
  const [page] = await turn.done

  expect(page).toFailWith('timeout', 'time limit of 30000 ms')
  expect(page).toHaveRetried(2)
  expect(fetchPage.calls.map((call) => [call.attempt, call.signalAborted])).toEqual([[1, true], [2, true], [3, true]])
})

test('a retry waits the Retry-After the tool asked for, on the clock', async () => {
  const quote = flaky(1, new RetryableError('429 Too Many Requests', { retryAfterMs: 10_000 }), '42.17')
  const { clock, gate } = gateOnClock({ name: 'quote', readOnly: true, retry: { maxRetries: 1, initialDelayMs: 100 }, handler: quote })
  const turn = start(gate, [{ name: 'quote' }])

  await clock.advance(9_999)
  expect(quote.calls).toHaveLength(1)
  await clock.advance(1)
  const [price] = await turn.done

  expect(price).toSucceed('42.17')
  expect(price).toHaveRetried(1)
  expect(price.metadata.attemptErrors[0].retryInMs).toBe(10_000)
})

test('a call waits for a rate-limit token for a minute of clock time, then runs', async () => {
  const { clock, gate } = gateOnClock({ name: 'geocode', readOnly: true, rateLimit: { limit: '1/min', maxWaitMs: 120_000 }, handler: ok('38.72,-9.14') })
  const turn = start(gate, [{ name: 'geocode', input: { q: 'Lisbon' } }, { name: 'geocode', input: { q: 'Porto' } }])

  await clock.advance(59_999)
  expect(turn.results).toBeUndefined()
  await clock.advance(1)
  const [lisbon, porto] = await turn.done

  expect(lisbon).toSucceed()
  expect(porto).toSucceed()
})

test('clock.next() steps from one due moment to the next', async () => {
  const { clock, gate } = gateOnClock({ name: 'export', readOnly: true, timeoutMs: 120_000, handler: hangs() })
  const turn = start(gate, [{ name: 'export' }])

  expect(await clock.next()).toBe(120_000)
  const [exported] = await turn.done

  expect(exported).toFailWith('timeout')
  expect(clock.now()).toBe(120_000)
})
