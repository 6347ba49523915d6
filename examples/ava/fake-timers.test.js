// A suite that fakes timers for its own code with @sinonjs/fake-timers: the gate keeps real time, and a manual clock
// ticks the faked timers along when a handler waits on them. The fake is global, so these tests run serially.
const test = require('ava')
const FakeTimers = require('@sinonjs/fake-timers')
const { ToolExecutor } = require('toolgate')
const { expectResult, hangs, hangsIgnoringSignal, huge, manualClock } = require('toolgate/testing')

test.beforeEach((t) => {
  t.context.fake = FakeTimers.install()
})
test.afterEach.always((t) => {
  t.context.fake.uninstall()
})

/** A gate closed after the test, with `tools` registered. */
function openGate(t, tools, options) {
  const gate = new ToolExecutor(options)
  for (const tool of tools) gate.register(tool)
  t.teardown(() => gate.close({ timeoutMs: 100 }))
  return gate
}

test.serial('a 50 ms limit still fires, on real time, while setTimeout and Date are faked', async (t) => {
  const gate = openGate(t, [{ name: 'lookup', timeoutMs: 50, handler: hangs() }])
  const turn = gate.execute([{ name: 'lookup' }])
  t.context.fake.tick(60_000) // faked time does nothing to the gate's limits
  const [result] = await turn
  expectResult(result).toFailWith('timeout', 'time limit of 50 ms')
  t.is(Date.now(), 60_000)
})

test.serial('an output over 262,144 characters still comes through', async (t) => {
  const gate = openGate(t, [{ name: 'dump_logs', handler: huge(400_000) }])
  const [result] = await gate.execute([{ name: 'dump_logs' }])
  expectResult(result).toSucceed().toBeTruncated()
  t.is(result.metadata.originalChars, 400_000)
})

test.serial('close({ timeoutMs }) returns, naming the handler that never settled', async (t) => {
  const gate = new ToolExecutor()
  gate.register({ name: 'stuck', handler: hangsIgnoringSignal() })
  const turn = gate.execute([{ name: 'stuck' }])
  const { stillRunning } = await gate.close({ timeoutMs: 100 })
  t.deepEqual(stillRunning.map((h) => h.toolName), ['stuck'])
  expectResult((await turn)[0]).toFailWith('cancelled')
})

test.serial('a manual clock that ticks the faked timers: a handler\'s faked wait and the gate\'s limit move together', async (t) => {
  const { fake } = t.context
  const clock = manualClock({ onAdvance: (ms) => fake.tickAsync(ms) })
  const poll = (_args, { signal }) => new Promise((resolve, reject) => {
    const timer = setTimeout(resolve, 45_000, 'ready')
    signal.addEventListener('abort', () => {
      clearTimeout(timer)
      reject(signal.reason)
    })
  })
  const gate = openGate(t, [{ name: 'poll', timeoutMs: 30_000, handler: poll }], { clock })
  const turn = gate.execute([{ name: 'poll' }])

  await clock.advance(30_000)
  const [result] = await turn

  expectResult(result).toFailWith('timeout', 'time limit of 30000 ms')
  t.is(Date.now(), 30_000)
  t.is(fake.countTimers(), 0, 'the handler cleared its faked timer when its signal aborted')
})
