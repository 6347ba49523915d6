// A coding agent's conversation in OpenAI's chat format, without a network: mocked tools behind the gate and a model
// that replays a script.
const test = require('ava')
const { ToolExecutor } = require('toolgate')
const { expectResult, flaky, hangs, ok, rejectsWith, runAgentLoop, scriptedModel } = require('toolgate/testing')

const call = (id, name, args = {}) => ({ id, type: 'function', function: { name, arguments: JSON.stringify(args) } })

/** The agent's gate, closed after the test, and its tools: each a mock with the behaviour under test. */
function codingAgent(t) {
  const tools = {
    read_file: ok('export const answer = 42\n'),
    run_tests: flaky(2, undefined, '12 passed'),
    lint: rejectsWith(undefined),
    install: hangs(),
  }
  const gate = new ToolExecutor({ retry: { maxRetries: 2, initialDelayMs: 1 } })
  t.teardown(() => gate.close({ timeoutMs: 100 }))
  gate.register({
    name: 'read_file',
    readOnly: true,
    parameters: { type: 'object', properties: { path: { type: 'string' } }, required: ['path'] },
    handler: tools.read_file,
  })
  gate.register({ name: 'run_tests', readOnly: true, handler: tools.run_tests })
  gate.register({ name: 'lint', readOnly: true, handler: tools.lint })
  gate.register({ name: 'install', timeoutMs: 50, handler: tools.install })
  return { gate, tools }
}

/** Each assistant message's tool_calls against the tool messages after it: exactly one per call, same ids in the
 * same order; returns whether each was an error, turn by turn. */
function pairedResults(t, transcript) {
  const turns = []
  transcript.forEach((message, i) => {
    if (message.role !== 'assistant' || !message.tool_calls) return
    const answers = transcript.slice(i + 1, i + 1 + message.tool_calls.length)
    t.deepEqual(answers.map((a) => [a.role, a.tool_call_id]), message.tool_calls.map((c) => ['tool', c.id]))
    t.not(transcript[i + 1 + answers.length]?.role, 'tool', 'no extra tool message')
    turns.push(answers.map((a) => a.content.startsWith('Error (')))
  })
  return turns
}

test('every tool_call gets exactly one tool message; the failed ones say so', async (t) => {
  const { gate, tools } = codingAgent(t)
  const model = scriptedModel([
    { text: 'Reading the module first.', calls: [call('c1', 'read_file', { path: 'src/answer.ts' }), call('c2', 'read_file', { file: 'src/answer.ts' })] },
    { calls: [call('c3', 'run_tests'), call('c4', 'lint'), call('c5', 'install', { pkg: 'left-pad' })] },
    'The tests pass; lint and install need a look.',
  ])
  const { transcript, turns, text } = await runAgentLoop(gate, model, { format: 'openai-chat', prompt: 'Fix the failing test.' })

  t.is(text, 'The tests pass; lint and install need a look.')
  t.deepEqual(pairedResults(t, transcript), [
    [false, true],
    [false, true, true],
  ])
  const [[file, wrongArgs], [tests, lint, install]] = turns.map((turn) => turn.results)
  expectResult(file).toSucceed('export const answer = 42\n')
  expectResult(wrongArgs).toFailWith('invalid_arguments', 'path')
  expectResult(tests).toSucceed('12 passed').toHaveRetried(2)
  expectResult(lint).toFailWith('handler_error', 'without a reason')
  expectResult(install).toFailWith('timeout', 'time limit of 50 ms').toHaveRetried(0)

  t.deepEqual(tools.run_tests.calls.map((c) => c.attempt), [1, 2, 3])
  t.true(tools.install.calls[0].signalAborted)
  t.is(model.requests.length, 3)
})

test('the model sees each result before it answers', async (t) => {
  const { gate } = codingAgent(t)
  const model = scriptedModel([{ calls: [call('r1', 'read_file', { path: 'README.md' })] }, 'It exports 42.'])
  await runAgentLoop(gate, model, { format: 'openai-chat' })

  const seen = model.requests[1].at(-1)
  t.deepEqual(seen, { role: 'tool', tool_call_id: 'r1', content: 'export const answer = 42\n' })
})
