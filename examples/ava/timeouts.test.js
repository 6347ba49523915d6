// The second file of the suite, in a worker thread started after the first file's.
const test = require('ava')

let ToolExecutor
test.before(async () => {
  // Its fixtures take a moment to set up, as real ones do: the addon loads after the first file's worker has ended.
  await new Promise((resolve) => setTimeout(resolve, 300))
  ;({ ToolExecutor } = require('../../index.js'))
})

test('a handler that hangs comes back as a timeout, on time', async (t) => {
  const gate = new ToolExecutor()
  gate.register({ name: 'hang', timeoutMs: 50, handler: () => new Promise(() => {}) })
  const started = Date.now()
  const [result] = await gate.execute([{ name: 'hang' }])
  t.is(result.errorKind, 'timeout')
  t.true(Date.now() - started < 5_000)
})

test('an unknown tool is a result naming the tools there are', async (t) => {
  const gate = new ToolExecutor()
  gate.register({ name: 'search', handler: () => 'ok' })
  const [result] = await gate.execute([{ name: 'serach' }])
  t.is(result.errorKind, 'unknown_tool')
  t.true(result.error.includes('Did you mean "search"?'))
})
