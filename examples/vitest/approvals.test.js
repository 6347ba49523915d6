// The suite's third file: a tool that needs approval, approved and declined.
import { beforeAll, expect, test } from 'vitest'

let ToolExecutor
beforeAll(async () => {
  // As in tools.test.js: the addon loads after the previous file's worker has ended.
  await new Promise((resolve) => setTimeout(resolve, 300))
  ;({ ToolExecutor } = await import('../../index.js'))
})

function deployGate(answer) {
  const gate = new ToolExecutor({ approve: () => answer })
  gate.register({ name: 'deploy', needsApproval: true, handler: () => 'deployed' })
  return gate
}

test('an approved call runs', async () => {
  const [result] = await deployGate(true).execute([{ name: 'deploy' }])
  expect(result.output).toBe('deployed')
  expect(result.metadata.permission.decision).toBe('approved')
})

test('a declined call is a result the model can read, and the handler never runs', async () => {
  const [result] = await deployGate({ decision: 'deny', reason: 'not on a Friday' }).execute([{ name: 'deploy' }])
  expect(result.errorKind).toBe('approval_denied')
  expect(result.error).toContain('not on a Friday')
})
