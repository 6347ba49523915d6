// The suite's second file: a hung handler and an unknown tool.
import { beforeAll, expect, test } from 'vitest'

let ToolExecutor
beforeAll(async () => {
  // As in tools.test.js: the addon loads after the previous file's worker has ended.
  await new Promise((resolve) => setTimeout(resolve, 300))
  ;({ ToolExecutor } = await import('../../index.js'))
})

test('a handler that hangs comes back as a timeout, on time', async () => {
  const gate = new ToolExecutor()
  gate.register({ name: 'hang', timeoutMs: 50, handler: () => new Promise(() => {}) })
  const started = Date.now()
  const [result] = await gate.execute([{ name: 'hang' }])
  expect(result.errorKind).toBe('timeout')
  expect(Date.now() - started).toBeLessThan(5_000)
})

test('an unknown tool is a result naming the tools there are', async () => {
  const gate = new ToolExecutor()
  gate.register({ name: 'search', handler: () => 'ok' })
  const [result] = await gate.execute([{ name: 'serach' }])
  expect(result.errorKind).toBe('unknown_tool')
  expect(result.error).toContain('Did you mean "search"?')
})
