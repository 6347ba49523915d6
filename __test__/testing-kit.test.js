'use strict'
// The testing kit (lib/testing): every mock through a real gate, the scripted model and the agent loop in each
// provider format, and the assertion helpers and matchers with the messages they give.

const { describe, it } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const { ToolExecutor, RetryableError, ERROR_KINDS } = require('..')
const mocks = require('../lib/testing/mocks.js')
const { scriptedModel, runAgentLoop } = require('../lib/testing/model.js')
const { expectResult, toolgateMatchers } = require('../lib/testing/assertions.js')

/** A gate closed when the test ends; the short close limit lets a handler that never settles go at once. */
function openGate(t, options) {
  const gate = new ToolExecutor(options)
  t.after(() => gate.close({ timeoutMs: 20 }))
  return gate
}

/** One call of `handler` registered as tool `tool` (with `spec`): its result. */
async function runOne(t, handler, spec = {}, { gateOptions, ...executeOptions } = {}) {
  const gate = openGate(t, gateOptions)
  gate.register({ name: 'tool', ...spec, handler })
  const [result] = await gate.execute([{ id: 'c1', name: 'tool', input: { q: 'x' } }], executeOptions)
  return result
}

/** A clock whose sleeps end when the test says: proof that a mock waits on the clock it is given. */
function manualClock() {
  const sleeps = []
  return {
    sleeps,
    sleep(ms, signal) {
      return new Promise((resolve, reject) => {
        sleeps.push({ ms, resolve })
        signal?.addEventListener('abort', () => reject(signal.reason), { once: true })
      })
    },
  }
}

/** Waits until `condition()` holds, a turn of the event loop at a time (a safety net of 5 s, never a timing). */
async function until(condition) {
  for (const started = Date.now(); !condition(); ) {
    if (Date.now() - started > 5_000) throw new Error('the condition never held')
    await new Promise((resolve) => setImmediate(resolve))
  }
}

describe('mocks through a real gate', () => {
  it('ok returns its value and records each call', async (t) => {
    const mock = mocks.ok({ temperature: 18 })
    const result = await runOne(t, mock)
    expectResult(result).toSucceed('{"temperature":18}')
    assert.equal(mock.calls.length, 1)
    const [call] = mock.calls
    assert.deepEqual({ ...call, startedAt: typeof call.startedAt }, {
      args: { q: 'x' }, callId: 'c1', attempt: 1, startedAt: 'number', signalAborted: false, abortedAt: undefined, abortReason: undefined,
    })
    mock.reset()
    assert.deepEqual(mock.calls, [])
  })

  it('throws an Error as given, or one made from a message, and the call is a handler_error', async (t) => {
    const error = Object.assign(new Error('disk full'), { code: 'ENOSPC' })
    const thrown = await runOne(t, mocks.throws(error))
    expectResult(thrown).toFailWith('handler_error', 'Error: disk full').toHaveRetried(0)
    assert.equal(thrown.metadata.errorCode, 'ENOSPC')
    expectResult(await runOne(t, mocks.throws('quota exceeded'))).toFailWith('handler_error', 'Error: quota exceeded')
  })

  it('rejectsWith rejects with exactly its value, undefined and non-Errors included', async (t) => {
    expectResult(await runOne(t, mocks.rejectsWith(undefined))).toFailWith('handler_error', 'it rejected without a reason')
    expectResult(await runOne(t, mocks.rejectsWith('just text'))).toFailWith('handler_error', /non-Error value.*just text/)
    const mock = mocks.rejectsWith(42)
    await assert.rejects(mock({}, { callId: 'c', attempt: 1, signal: new AbortController().signal }), (value) => value === 42)
  })

  it('hangs until its limit aborts it, and records the abort', async (t) => {
    const mock = mocks.hangs()
    const result = await runOne(t, mock, { timeoutMs: 100 })
    expectResult(result).toFailWith('timeout', 'within its time limit of 100 ms')
    const [call] = mock.calls
    assert.equal(call.signalAborted, true)
    assert.equal(typeof call.abortedAt, 'number')
    assert.equal(call.abortReason.name, 'TimeoutError')
  })

  it('hangs until the turn is cancelled, and records the caller\'s reason', async (t) => {
    const mock = mocks.hangs()
    const controller = new AbortController()
    const reason = new Error('the user pressed stop')
    const turn = runOne(t, mock, {}, { signal: controller.signal })
    await until(() => mock.calls.length === 1)
    controller.abort(reason)
    expectResult(await turn).toFailWith('cancelled', 'the user pressed stop')
    assert.equal(mock.calls[0].abortReason, reason)
  })

  it('hangsIgnoringSignal still gets its timeout, and the abort is recorded though it never settles', async (t) => {
    const mock = mocks.hangsIgnoringSignal()
    const gate = openGate(t)
    gate.register({ name: 'stuck', timeoutMs: 100, handler: mock })
    const [result] = await gate.execute([{ name: 'stuck' }])
    expectResult(result).toFailWith('timeout')
    assert.equal(mock.calls[0].signalAborted, true)
    assert.equal(mock.calls[0].abortReason.name, 'TimeoutError')
    assert.deepEqual(gate.pendingHandlers().map(({ toolName, state, reason }) => ({ toolName, state, reason })), [
      { toolName: 'stuck', state: 'abandoned', reason: 'timeout' },
    ])
  })

  it('slow resolves after its time, and rejects with the reason when stopped first', async (t) => {
    expectResult(await runOne(t, mocks.slow(5, 'done'))).toSucceed('done')
    const mock = mocks.slow(60_000, 'never')
    expectResult(await runOne(t, mock, { timeoutMs: 100 })).toFailWith('timeout')
    assert.equal(mock.calls[0].signalAborted, true)
  })

  it('slow waits on the clock it is given', async (t) => {
    const clock = manualClock()
    const mock = mocks.slow(60_000, 'on time', { clock })
    const turn = runOne(t, mock)
    await until(() => clock.sleeps.length === 1)
    assert.equal(clock.sleeps[0].ms, 60_000)
    clock.sleeps[0].resolve()
    expectResult(await turn).toSucceed('on time')
  })

  it('keeps real timers when fake timers are installed after it loaded', async (t) => {
    t.mock.timers.enable({ apis: ['setTimeout'] })
    const value = await mocks.slow(5, 'real')({}, { callId: 'c', attempt: 1, signal: new AbortController().signal })
    assert.equal(value, 'real')
  })

  it('flaky(2) fails twice with a RetryableError and succeeds on the third attempt', async (t) => {
    const mock = mocks.flaky(2, undefined, 'finally')
    const result = await runOne(t, mock, { retry: { maxRetries: 2, initialDelayMs: 1 } })
    expectResult(result).toSucceed('finally').toHaveRetried(2)
    assert.deepEqual(mock.calls.map((c) => c.attempt), [1, 2, 3])
    assert.deepEqual(result.metadata.attemptErrors.map((e) => e.errorKind), ['handler_error', 'handler_error'])
    assert.match(result.metadata.attemptErrors[0].error, /RetryableError: flaky: call 1 of the first 2 fails/)
  })

  it('flaky counts its calls until reset, takes a message as a RetryableError, and an Error as it is', async (t) => {
    const spec = { retry: { maxRetries: 1, initialDelayMs: 1 } }
    const mock = mocks.flaky(3, 'index rebuilding', 'ok')
    const exhausted = await runOne(t, mock, spec)
    expectResult(exhausted).toFailWith('handler_error', 'RetryableError: index rebuilding').toHaveRetried(1)
    assert.equal(exhausted.retryable, true)
    expectResult(await runOne(t, mock, spec)).toSucceed('ok').toHaveRetried(1)
    mock.reset()
    expectResult(await runOne(t, mock, spec)).toFailWith('handler_error').toHaveRetried(1)
    const permanent = await runOne(t, mocks.flaky(1, new Error('bad request'), 'ok'), spec)
    expectResult(permanent).toFailWith('handler_error', 'Error: bad request').toHaveRetried(0)
  })

  it('flaky throws a RetryableError by default, and returns undefined without a value', () => {
    const mock = mocks.flaky(1)
    const ctx = { callId: 'c', attempt: 1, signal: new AbortController().signal }
    assert.throws(() => mock({}, ctx), RetryableError)
    assert.equal(mock({}, ctx), undefined)
  })

  it('huge returns exactly that many characters, and the gate truncates them', async (t) => {
    const mock = mocks.huge(300_000)
    const result = await runOne(t, mock)
    expectResult(result).toSucceed(/^\[Output too long for the context: 300000 characters/).toBeTruncated()
    assert.equal(result.metadata.originalChars, 300_000)
    assert.equal(fs.readFileSync(result.metadata.artifactPath, 'utf8').length, 300_000)
  })

  it('progressThenSilence reports its steps, then stalls into an idle_timeout', async (t) => {
    const mock = mocks.progressThenSilence(3)
    const seen = []
    const result = await runOne(t, mock, { idleTimeoutMs: 100 }, { onProgress: (event) => seen.push(event.info) })
    expectResult(result).toFailWith('idle_timeout', 'reported no progress for 100 ms')
    assert.deepEqual(seen, [1, 2, 3])
    assert.equal(mock.calls[0].signalAborted, true)
  })

  it('progressThenSilence spaces its steps on the clock it is given', async (t) => {
    const clock = manualClock()
    const seen = []
    const turn = runOne(t, mocks.progressThenSilence(3, { everyMs: 50, clock }), { idleTimeoutMs: 100 }, { onProgress: (event) => seen.push(event.info) })
    for (const step of [1, 2]) {
      await until(() => clock.sleeps.length === step)
      assert.deepEqual(seen, [1, 2].slice(0, step))
      clock.sleeps[step - 1].resolve()
    }
    expectResult(await turn).toFailWith('idle_timeout')
    assert.deepEqual(seen, [1, 2, 3])
    assert.deepEqual(clock.sleeps.map((s) => s.ms), [50, 50])
  })

  for (const [kind, rule] of [
    ['aws', 'aws-access-key-id'], ['github', 'github-token'], ['openai', 'openai-api-key'], ['jwt', 'jwt'],
    ['private-key', 'private-key'], ['password', 'secret-assignment'],
  ]) {
    it(`leaksSecret('${kind}') is redacted by the built-in rule ${rule}`, async (t) => {
      const mock = mocks.leaksSecret(kind)
      assert.equal(mock.rule, rule)
      const result = await runOne(t, mock)
      expectResult(result).toSucceed(new RegExp(`\\[REDACTED:${rule}\\]`))
      assert.ok(!JSON.stringify(result).includes(mock.secret), 'the secret reaches no part of the result')
      assert.deepEqual(result.metadata.redactions, { [rule]: 1 })
    })
  }

  it('leaksSecret refuses an unknown kind, naming the kinds', () => {
    assert.throws(() => mocks.leaksSecret('azure'), { name: 'TypeError', message: /one of aws, github, openai, jwt, private-key, password; got azure/ })
    assert.throws(() => mocks.leaksSecret('toString'), TypeError)
  })
})

describe('scriptedModel', () => {
  it('replays its turns, keeps a deep copy of each request, and says when the script is exhausted', async () => {
    const call = { id: 'a', name: 'lookup', input: {} }
    const model = scriptedModel([{ calls: [call], text: 'Looking.' }, 'Done.'])
    const messages = [{ role: 'user', content: 'Go.' }]
    assert.deepEqual(await model.respond(messages), { calls: [call], text: 'Looking.' })
    messages.push({ role: 'assistant', content: 'later' })
    messages[0].content = 'changed'
    assert.deepEqual(await model.respond(messages), { calls: [], text: 'Done.' })
    await assert.rejects(model.respond(messages), { message: 'scriptedModel: the script has 2 turns and the model was asked for turn 3' })
    assert.deepEqual(model.requests, [
      [{ role: 'user', content: 'Go.' }],
      [{ role: 'user', content: 'changed' }, { role: 'assistant', content: 'later' }],
      [{ role: 'user', content: 'changed' }, { role: 'assistant', content: 'later' }],
    ])
  })

  it('refuses a script that is not a list of strings and { calls } turns', () => {
    assert.throws(() => scriptedModel('Done.'), TypeError)
    assert.throws(() => scriptedModel(['ok', { calls: 'lookup' }]), { name: 'TypeError', message: /turns\[1\]/ })
    assert.throws(() => scriptedModel([null]), { name: 'TypeError', message: /turns\[0\]/ })
  })
})

describe('runAgentLoop', () => {
  /** A gate with a tool that answers, one that fails and one that reads the context. */
  function toolsGate(t) {
    const gate = openGate(t)
    const lookup = mocks.ok('found it')
    gate.register({ name: 'lookup', parameters: { type: 'object', properties: { q: { type: 'string' } }, required: ['q'] }, handler: lookup })
    gate.register({ name: 'broken', handler: mocks.throws('upstream down') })
    gate.register({ name: 'whoami', handler: (_args, ctx) => ctx.context?.userId ?? 'nobody' })
    return { gate, lookup }
  }

  /** Calls in several shapes, one without an id: each format must write them all in its own. */
  const SCRIPT = [
    {
      text: 'Let me look.',
      calls: [
        { type: 'tool_use', id: 'c1', name: 'lookup', input: { q: 'coats' } },
        { type: 'function_call', call_id: 'c2', name: 'broken', arguments: '{}' },
      ],
    },
    {
      calls: [
        { id: 'c3', type: 'function', function: { name: 'whoami', arguments: '' } },
        { name: 'lookup', arguments: { q: 'hats' } },
        { functionCall: { name: 'lookup', args: { q: 'gloves' } } },
        { toolUse: { toolUseId: 'c5', name: 'whoami', input: {} } },
      ],
    },
    'All done.',
  ]

  /** The turns of a transcript that pairs each assistant message with one message of results (`resultRole`),
   * read with `read`; it ends with the assistant's final text. */
  function pairedTurns(transcript, resultRole, read, answer = { role: 'assistant', content: [{ type: 'text', text: 'All done.' }] }) {
    const turns = []
    for (let i = 1; i < transcript.length - 1; i += 2) {
      const [assistant, answer] = [transcript[i], transcript[i + 1]]
      assert.equal(assistant.role, 'assistant')
      assert.equal(answer.role, resultRole)
      turns.push({ text: read.text(assistant), calls: read.calls(assistant), results: read.results(answer) })
    }
    assert.deepEqual(transcript.at(-1), answer)
    return turns
  }

  /** Per format: the prompt, each tool turn's calls as `{ id, name, args }` and result ids with their failure flag,
   * read back from the transcript, and the final answer. */
  const READERS = {
    anthropic: (transcript) => pairedTurns(transcript, 'user', {
      text: (assistant) => assistant.content.find((b) => b.type === 'text')?.text,
      calls: (assistant) => assistant.content.filter((b) => b.type === 'tool_use').map((b) => ({ id: b.id, name: b.name, args: b.input })),
      results: (user) => user.content.map((b) => ({ id: b.tool_use_id, failed: b.is_error === true, text: b.content })),
    }),
    'openai-responses'(transcript) {
      const turns = []
      let turn
      for (const item of transcript.slice(1, -1)) {
        if (item.type === 'message' || (item.type === 'function_call' && (turn === undefined || turn.results.length > 0))) {
          turn = { text: undefined, calls: [], results: [] }
          turns.push(turn)
        }
        if (item.type === 'message') turn.text = item.content[0].text
        else if (item.type === 'function_call') turn.calls.push({ id: item.call_id, name: item.name, args: JSON.parse(item.arguments || '{}') })
        else turn.results.push({ id: item.call_id, failed: item.output.startsWith('Error ('), text: item.output })
      }
      assert.deepEqual(transcript.at(-1), { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'All done.' }] })
      return turns
    },
    'openai-chat'(transcript) {
      const turns = []
      for (const message of transcript.slice(1, -1)) {
        if (message.role === 'assistant') {
          const calls = message.tool_calls.map((c) => ({ id: c.id, name: c.function.name, args: JSON.parse(c.function.arguments || '{}') }))
          turns.push({ text: message.content ?? undefined, calls, results: [] })
        } else {
          assert.equal(message.role, 'tool')
          turns.at(-1).results.push({ id: message.tool_call_id, failed: message.content.startsWith('Error ('), text: message.content })
        }
      }
      assert.deepEqual(transcript.at(-1), { role: 'assistant', content: 'All done.' })
      return turns
    },
    'ai-sdk': (transcript) => pairedTurns(transcript, 'tool', {
      text: (assistant) => assistant.content.find((p) => p.type === 'text')?.text,
      calls: (assistant) => assistant.content.filter((p) => p.type === 'tool-call').map((p) => ({ id: p.toolCallId, name: p.toolName, args: p.input })),
      results: (tool) => tool.content.map((p) => ({ id: p.toolCallId, failed: p.output.type === 'error-text', text: p.output.value })),
    }),
    gemini(transcript) {
      const turns = []
      for (let i = 1; i < transcript.length - 1; i += 2) {
        const [model, user] = [transcript[i], transcript[i + 1]]
        assert.equal(model.role, 'model')
        assert.equal(user.role, 'user')
        turns.push({
          text: model.parts.find((p) => p.text !== undefined)?.text,
          calls: model.parts.filter((p) => p.functionCall).map(({ functionCall: c }) => ({ id: c.id, name: c.name, args: c.args })),
          results: user.parts.map(({ functionResponse: r }) => ({ id: r.id, failed: 'error' in r.response, text: r.response.output ?? r.response.error })),
        })
      }
      assert.deepEqual(transcript.at(-1), { role: 'model', parts: [{ text: 'All done.' }] })
      return turns
    },
    bedrock: (transcript) => pairedTurns(transcript, 'user', {
      text: (assistant) => assistant.content.find((b) => b.text !== undefined)?.text,
      calls: (assistant) => assistant.content.filter((b) => b.toolUse).map(({ toolUse: c }) => ({ id: c.toolUseId, name: c.name, args: c.input })),
      results: (user) => user.content.map(({ toolResult: r }) => ({ id: r.toolUseId, failed: r.status === 'error', text: r.content[0].text })),
    }, { role: 'assistant', content: [{ text: 'All done.' }] }),
  }
  /** The prompt as each format writes a user's text. */
  const PROMPTS = {
    gemini: { role: 'user', parts: [{ text: 'Do I need a coat?' }] },
    bedrock: { role: 'user', content: [{ text: 'Do I need a coat?' }] },
  }

  for (const format of Object.keys(READERS)) {
    it(`runs a scripted conversation in the ${format} format, one result per call, in order`, async (t) => {
      const { gate, lookup } = toolsGate(t)
      const model = scriptedModel(SCRIPT)
      const run = await runAgentLoop(gate, model, { format, context: { userId: 'u_42' }, prompt: 'Do I need a coat?' })

      assert.equal(run.text, 'All done.')
      assert.deepEqual(run.transcript[0], PROMPTS[format] ?? { role: 'user', content: 'Do I need a coat?' })
      assert.deepEqual(run.turns.map((turn) => turn.calls), [SCRIPT[0].calls, SCRIPT[1].calls])
      const generated = run.turns[1].results.slice(1, 3).map((r) => r.callId)
      for (const id of generated) assert.match(id, /^call_/)
      const turns = READERS[format](run.transcript)
      assert.deepEqual(turns.map(({ text, calls }) => ({ text, calls })), [
        { text: 'Let me look.', calls: [{ id: 'c1', name: 'lookup', args: { q: 'coats' } }, { id: 'c2', name: 'broken', args: {} }] },
        {
          text: undefined,
          calls: [
            { id: 'c3', name: 'whoami', args: {} },
            { id: generated[0], name: 'lookup', args: { q: 'hats' } },
            { id: generated[1], name: 'lookup', args: { q: 'gloves' } },
            { id: 'c5', name: 'whoami', args: {} },
          ],
        },
      ])
      for (const [i, turn] of turns.entries()) {
        assert.deepEqual(turn.results.map((r) => r.id), turn.calls.map((c) => c.id), `turn ${i + 1}: one result per call, in order`)
        assert.deepEqual(turn.results.map((r) => r.failed), run.turns[i].results.map((r) => !r.success))
      }
      assert.deepEqual(turns.map((turn) => turn.results.map((r) => r.text)), [
        ['found it', run.turns[0].results[1].output],
        ['u_42', 'found it', 'found it', 'u_42'],
      ])
      expectResult(run.turns[0].results[1]).toFailWith('handler_error', 'upstream down')
      assert.deepEqual(lookup.calls.map((c) => c.args), [{ q: 'coats' }, { q: 'hats' }, { q: 'gloves' }])

      // The model saw the whole conversation so far at each turn, and never its own final answer.
      assert.equal(model.requests.length, 3)
      assert.deepEqual(model.requests[0], [run.transcript[0]])
      assert.deepEqual(model.requests[2], run.transcript.slice(0, -1))
      assert.deepEqual(model.requests[1], run.transcript.slice(0, model.requests[1].length))
    })
  }

  it('marks failed results is_error for anthropic, and only those', async (t) => {
    const { gate } = toolsGate(t)
    const run = await runAgentLoop(gate, scriptedModel([SCRIPT[0], 'All done.']), { format: 'anthropic' })
    assert.deepEqual(run.transcript[2].content.map(({ tool_use_id, is_error }) => ({ tool_use_id, is_error })), [
      { tool_use_id: 'c1', is_error: undefined },
      { tool_use_id: 'c2', is_error: true },
    ])
  })

  it('starts from "Go." and ends on a turn without calls', async (t) => {
    const { gate } = toolsGate(t)
    const model = scriptedModel(['Nothing to do.'])
    const run = await runAgentLoop(gate, model, { format: 'openai-chat' })
    assert.deepEqual(run, {
      transcript: [{ role: 'user', content: 'Go.' }, { role: 'assistant', content: 'Nothing to do.' }],
      turns: [],
      text: 'Nothing to do.',
    })
  })

  it('passes the signal to every turn, and asks the model nothing once it aborted', async (t) => {
    const { gate, lookup } = toolsGate(t)
    const controller = new AbortController()
    const model = scriptedModel([SCRIPT[0], SCRIPT[0], 'Stopped.'])
    const respond = model.respond.bind(model)
    model.respond = async (messages, options) => {
      const turn = await respond(messages, options)
      if (model.requests.length === 1) controller.abort(new Error('the user stopped it'))
      return turn
    }
    await assert.rejects(runAgentLoop(gate, model, { format: 'ai-sdk', signal: controller.signal }), { message: 'the user stopped it' })
    assert.equal(model.requests.length, 1, 'no turn after the abort')
    assert.equal(lookup.calls.length, 0, "the aborted turn's calls were cancelled")
    await assert.rejects(runAgentLoop(gate, scriptedModel(['x']), { format: 'ai-sdk', maxTurns: 0 }), { name: 'TypeError', message: /maxTurns must be a positive integer/ })
  })

  it('gives up after maxTurns turns that all called tools', async (t) => {
    const { gate } = toolsGate(t)
    const busy = { calls: [{ id: 'x', name: 'lookup', input: { q: 'again' } }] }
    await assert.rejects(runAgentLoop(gate, scriptedModel([busy, busy, busy]), { format: 'anthropic', maxTurns: 2 }), {
      message: 'runAgentLoop: the model still called tools after maxTurns (2) turns',
    })
  })

  it('says so when the script runs out before the conversation ends', async (t) => {
    const { gate } = toolsGate(t)
    await assert.rejects(runAgentLoop(gate, scriptedModel([SCRIPT[0]]), { format: 'openai-responses' }), {
      message: 'scriptedModel: the script has 1 turns and the model was asked for turn 2',
    })
  })

  it('refuses an unknown format, listing the six', async (t) => {
    const { gate } = toolsGate(t)
    await assert.rejects(runAgentLoop(gate, scriptedModel(['x']), { format: 'vertex' }), {
      name: 'TypeError',
      message: 'runAgentLoop: format must be one of anthropic, openai-responses, openai-chat, ai-sdk, gemini, bedrock; got vertex',
    })
  })
})

describe('expectResult and toolgateMatchers', () => {
  /** One of each kind of result the checks look at. */
  async function results(t) {
    const gate = openGate(t, { retry: { maxRetries: 2, initialDelayMs: 1 } })
    gate.register({ name: 'answer', idempotent: true, handler: mocks.ok('42') })
    gate.register({ name: 'stuck', timeoutMs: 100, handler: mocks.hangs() })
    gate.register({ name: 'flaky', handler: mocks.flaky(2, undefined, 'ok') })
    gate.register({ name: 'flood', handler: mocks.huge(40_000) })
    const [success, timeout, retried, truncated] = await gate.execute([{ name: 'answer' }, { name: 'stuck' }, { name: 'flaky' }, { name: 'flood' }])
    const [cached] = await gate.execute([{ name: 'answer' }])
    return { success, cached, timeout, retried, truncated }
  }

  /** The AssertionError a failing check throws. */
  function failure(check) {
    try {
      check()
    } catch (error) {
      assert.ok(error instanceof assert.AssertionError, `an AssertionError, got ${error}`)
      return error
    }
    assert.fail('the check passed')
  }

  it('pass quietly and chain', async (t) => {
    const r = await results(t)
    expectResult(r.success).toSucceed().toSucceed('42').toSucceed(/^4/).toHaveRetried(0)
    expectResult(r.cached).toSucceed('42').toBeCached()
    expectResult(r.timeout).toFailWith('timeout').toFailWith('timeout', 'time limit of 100 ms').toFailWith('timeout', /100 ms/)
    expectResult(r.retried).toSucceed('ok').toHaveRetried(2)
    expectResult(r.truncated).toSucceed().toBeTruncated()
    const global = /4/g
    expectResult(r.success).toSucceed(global).toSucceed(global) // a global regex's lastIndex does not carry over
  })

  it('fail with messages that show what the result was', async (t) => {
    const r = await results(t)
    const notSucceeded = failure(() => expectResult(r.timeout).toSucceed())
    assert.equal(notSucceeded.operator, 'toSucceed')
    assert.match(notSucceeded.message, /^expected the result to succeed\n/)
    assert.match(notSucceeded.message, /tool: 'stuck' \(call 'call_\w+'\)/)
    assert.match(notSucceeded.message, /success: false, errorKind: timeout, attempts: 1, cached: false, truncated: false/)
    assert.match(notSucceeded.message, /output: 'Error \(timeout\): Tool "stuck" did not finish within its time limit of 100 ms/)

    assert.match(failure(() => expectResult(r.success).toSucceed('43')).message, /^expected the result to succeed with output equal to '43'\n[^]*output: '42'/)
    assert.match(failure(() => expectResult(r.success).toSucceed(/^5/)).message, /^expected the result to succeed with output matching \/\^5\/\n/)
    const notFailed = failure(() => expectResult(r.success).toFailWith('timeout', 'limit')).message
    assert.match(notFailed, /^expected the result to fail with timeout and an error containing 'limit'\n[^]*errorKind: \(none\)/)
    assert.match(failure(() => expectResult(r.timeout).toFailWith('cancelled')).message, /^expected the result to fail with cancelled\n[^]*errorKind: timeout/)
    assert.match(failure(() => expectResult(r.timeout).toFailWith('timeout', /rainbow/)).message, /and an error matching \/rainbow\//)
    assert.match(failure(() => expectResult(r.retried).toHaveRetried(0)).message, /^expected the result to have been retried 0 times \(attempts: 1\)\n[^]*attempts: 3/)
    assert.match(failure(() => expectResult(r.success).toHaveRetried(1)).message, /retried 1 time \(attempts: 2\)/)
    assert.match(failure(() => expectResult(r.success).toBeCached()).message, /^expected the result to be answered from the cache\n[^]*cached: false/)
    assert.match(failure(() => expectResult(r.success).toBeTruncated()).message, /^expected the result to be truncated\n[^]*truncated: false/)
  })

  it('cut a flood of output short in their messages', async (t) => {
    const r = await results(t)
    const { message } = failure(() => expectResult(r.truncated).toFailWith('timeout'))
    assert.ok(message.length < 1_000, `${message.length} characters`)
  })

  it('throw a TypeError for a mistake in the test itself', async (t) => {
    const r = await results(t)
    assert.throws(() => expectResult([r.success]).toSucceed(), { name: 'TypeError', message: /toSucceed: expected a ToolResult/ })
    assert.throws(() => expectResult(r.timeout).toFailWith('timed_out'), { name: 'TypeError', message: new RegExp(`one of ${ERROR_KINDS.join(', ')}; got 'timed_out'`) })
    assert.throws(() => expectResult(r.success).toHaveRetried(-1), TypeError)
    assert.throws(() => expectResult(r.success).toSucceed(42), { name: 'TypeError', message: /a string or a RegExp, got 42/ })
    assert.throws(() => toolgateMatchers.toBeCached(undefined), TypeError)
  })

  it('matchers give pass and a message that reads right both ways', async (t) => {
    const r = await results(t)
    const passed = toolgateMatchers.toSucceed(r.success, '42')
    assert.equal(passed.pass, true)
    assert.match(passed.message(), /^expected the result not to succeed with output equal to '42'\n[^]*output: '42'/)

    const failed = toolgateMatchers.toFailWith(r.success, 'timeout')
    assert.equal(failed.pass, false)
    assert.match(failed.message(), /^expected the result to fail with timeout\n[^]*errorKind: \(none\)/)

    const kind = toolgateMatchers.toFailWith(r.timeout, 'timeout', /100 ms/)
    assert.equal(kind.pass, true)
    assert.match(kind.message(), /^expected the result not to fail with timeout and an error matching \/100 ms\//)

    assert.equal(toolgateMatchers.toHaveRetried(r.retried, 2).pass, true)
    assert.match(toolgateMatchers.toHaveRetried(r.retried, 1).message(), /^expected the result to have been retried 1 time[^]*attempts: 3/)
    assert.equal(toolgateMatchers.toBeCached(r.cached).pass, true)
    assert.equal(toolgateMatchers.toBeTruncated(r.success).pass, false)
  })
})
