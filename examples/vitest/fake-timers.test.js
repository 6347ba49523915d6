// A suite that fakes timers for its own code: the gate keeps real time under vi.useFakeTimers(), and one line ties
// a manual clock to the faked timers when a handler waits on them.
import { afterEach, beforeEach, expect, onTestFinished, test, vi } from 'vitest'
import { ToolExecutor } from 'toolgate'
import { hangs, hangsIgnoringSignal, huge, manualClock, toolgateMatchers } from 'toolgate/testing'

expect.extend(toolgateMatchers)

beforeEach(() => {
  vi.useFakeTimers()
})
afterEach(() => {
  vi.useRealTimers()
})

/** A gate closed when the test ends, with `tools` registered. */
function openGate(tools, options) {
  const gate = new ToolExecutor(options)
  for (const tool of tools) gate.register(tool)
  onTestFinished(() => gate.close({ timeoutMs: 100 }))
  return gate
}

test('a 50 ms limit still fires, on real time, while setTimeout and Date are faked', async () => {
  expect(vi.isFakeTimers()).toBe(true)
  const gate = openGate([{ name: 'lookup', timeoutMs: 50, handler: hangs() }])
  const [result] = await gate.execute([{ name: 'lookup' }])
  expect(result).toFailWith('timeout', 'time limit of 50 ms')
})

test('an output over 262,144 characters still comes through', async () => {
  const gate = openGate([{ name: 'dump_logs', handler: huge(300_000) }])
  const [result] = await gate.execute([{ name: 'dump_logs' }])
  expect(result).toSucceed(/^\[Output too long for the context: 300000 characters/)
  expect(result).toBeTruncated()
  expect(result.metadata.originalChars).toBe(300_000)
})

test('close({ timeoutMs }) returns, naming the handler that never settled', async () => {
  const gate = new ToolExecutor()
  gate.register({ name: 'stuck', timeoutMs: 50, handler: hangsIgnoringSignal() })
  const [result] = await gate.execute([{ name: 'stuck' }])
  expect(result).toFailWith('timeout')
  const { stillRunning } = await gate.close({ timeoutMs: 100 })
  expect(stillRunning.map(({ toolName, state }) => ({ toolName, state }))).toEqual([{ toolName: 'stuck', state: 'abandoned' }])
})

/** A handler that takes `ms` on the faked setTimeout, as code under test would. */
const takes = (ms) => () => new Promise((resolve) => setTimeout(() => resolve(`report after ${ms} ms`), ms))

/** A gate whose 30 s limit is on a manual clock that moves vitest's faked timers with it. */
function reportGate(handlerMs) {
  const clock = manualClock({ onAdvance: (ms) => vi.advanceTimersByTimeAsync(ms) })
  const gate = openGate([{ name: 'build_report', timeoutMs: 30_000, handler: takes(handlerMs) }], { clock })
  return { clock, startedAt: Date.now(), turn: gate.execute([{ name: 'build_report' }]) }
}

test('on a manual clock tied to the faked timers, a handler that takes 20 s makes its 30 s limit', async () => {
  const { clock, startedAt, turn } = reportGate(20_000)
  await clock.advance(20_000)
  const [result] = await turn
  expect(result).toSucceed('report after 20000 ms')
  expect(Date.now() - startedAt).toBe(20_000) // the faked Date moved with the clock
})

test('on a manual clock tied to the faked timers, a handler that takes 25 s makes its limit when the clock jumps 30 s', async () => {
  const { clock, turn } = reportGate(25_000)
  await clock.advance(30_000) // the faked timers move first: the handler answers before its limit falls due
  const [result] = await turn
  expect(result).toSucceed('report after 25000 ms')
})

test('on a manual clock tied to the faked timers, a handler that takes 45 s times out at 30 s', async () => {
  const { clock, startedAt, turn } = reportGate(45_000)
  await clock.advance(30_000)
  const [result] = await turn
  expect(result).toFailWith('timeout', 'time limit of 30000 ms')
  expect(Date.now() - startedAt).toBe(30_000)
  expect(vi.getTimerCount()).toBe(1) // the handler's own timer, 15 s from firing
})
