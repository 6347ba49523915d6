'use strict'
// toolgate/openai-agents against the real @openai/agents: its Runner, Agent, RunState and its own ScriptedModel
// (@openai/agents/testing, a Model that answers each request with the next step of a script and records every
// request it gets). The Runner decides everything it decides for any app: which calls it parses, looks up, asks
// approval for and invokes, and what the next request holds. Scheduling is asserted from the handlers' recorded
// start/end events, what the model read from the requests the ScriptedModel recorded.

const { describe, it } = require('node:test')
const assert = require('node:assert/strict')
const { Agent, Runner, RunState, ModelBehaviorError, tool, toolSearchTool } = require('@openai/agents')
const { ScriptedModel, functionCall, assistantMessage } = require('@openai/agents/testing')
const { ToolExecutor } = require('..')
const {
  openAiAgentsTools, openAiAgentsRunConfig, openAiAgentsApproval, openAiAgentsModel, openAiAgentsModelProvider,
} = require('toolgate/openai-agents')
const { recorder, never, untilAborted, deferred, runChild, lastJsonLine, sleep } = require('./helpers')

const ID = { type: 'object', properties: { id: { type: 'string' } }, required: ['id'], additionalProperties: false }

/** A response of the script: function calls `[name, arguments (object or the model's raw text), callId]`. */
const calls = (...specs) => specs.map(([name, args, callId]) => functionCall(name, args, { callId }))
const done = [assistantMessage('done')]

/** The agent over the gate's tools and the wrapped ScriptedModel, and a Runner with the adapter's options. */
function agentOver(gate, script, { wrap = true, runConfig = true, toolsOptions } = {}) {
  const model = new ScriptedModel(script)
  const agent = new Agent({ name: 'assistant', model: wrap ? openAiAgentsModel(gate, model) : model, tools: openAiAgentsTools(gate, toolsOptions) })
  const runner = new Runner({ tracingDisabled: true, ...(runConfig ? openAiAgentsRunConfig(gate, toolsOptions) : {}) })
  return { model, agent, runner }
}

/** What the model read in a request: each tool result's text, in order, as `[callId, text]`. */
function resultsIn(call) {
  const input = Array.isArray(call.request.input) ? call.request.input : []
  return input.filter((item) => item.type === 'function_call_result').map((item) => [item.callId, item.output.text ?? item.output])
}

/** The calls in a request's history, as `[callId, arguments]`: what the model reads back of what it sent. */
function callsIn(call) {
  const input = Array.isArray(call.request.input) ? call.request.input : []
  return input.filter((item) => item.type === 'function_call').map((item) => [item.callId, item.arguments])
}

describe('toolgate/openai-agents: turns', () => {
  it('runs the calls of one model response as one turn: reads together, each write alone and in order', async () => {
    const rec = recorder()
    const gate = new ToolExecutor({ otel: false })
    gate.register({ name: 'read', readOnly: true, parameters: ID, handler: rec.handler(30) })
    gate.register({ name: 'write', parameters: ID, handler: rec.handler(20) })
    const { model, agent, runner } = agentOver(gate, [
      calls(['read', { id: 'a' }, 'c1'], ['read', { id: 'b' }, 'c2'], ['write', { id: 'w' }, 'c3'], ['read', { id: 'c' }, 'c4']),
      calls(['read', { id: 'd' }, 'c5'], ['read', { id: 'e' }, 'c6']),
      done,
    ])

    const result = await runner.run(agent, 'Go')

    assert.equal(result.finalOutput, 'done')
    assert.equal(model.calls.length, 3)
    const at = rec.index
    // First response: a and b together, then w alone once both ended, then c once w ended.
    assert.ok(at('start:b') < at('end:a') && at('start:a') < at('end:b'), rec.events.join(' '))
    assert.ok(at('start:w') > at('end:a') && at('start:w') > at('end:b'), rec.events.join(' '))
    assert.ok(at('start:c') > at('end:w'), rec.events.join(' '))
    // Second response: d and e together.
    assert.ok(at('start:e') < at('end:d') && at('start:d') < at('end:e'), rec.events.join(' '))
    assert.deepEqual(resultsIn(model.calls[1]), [['c1', 'a'], ['c2', 'b'], ['c3', 'w'], ['c4', 'c']])
    assert.deepEqual(resultsIn(model.calls[2]).slice(4), [['c5', 'd'], ['c6', 'e']])
    assert.equal(gate.stats().total.calls, 6)
  })

  it('gives the next request exactly one result per call id, whatever became of each call', async () => {
    const gate = new ToolExecutor({ otel: false })
    gate.register({ name: 'read', readOnly: true, parameters: ID, timeoutMs: 50, handler: ({ id }) => (id === 'slow' ? never() : id) })
    gate.register({ name: 'write', parameters: ID, handler: ({ id }) => `wrote ${id}` })
    const { model, agent, runner } = agentOver(gate, [
      calls(
        ['read', { id: 'a' }, 'c1'], ['write', '{"id": "w",}', 'c2'], ['raed', { id: 'x' }, 'c3'],
        ['read', { id: 'slow' }, 'c4'], ['write', '{"id": "cut', 'c5'], ['read', { id: 7 }, 'c6'],
      ),
      done,
    ])

    await runner.run(agent, 'Go')

    const results = resultsIn(model.calls[1])
    assert.deepEqual(results.map(([id]) => id).sort(), ['c1', 'c2', 'c3', 'c4', 'c5', 'c6'])
    const text = Object.fromEntries(results)
    assert.equal(text.c1, 'a')
    assert.match(text.c2, /^wrote w\n\[arguments adjusted before running: /)
    assert.match(text.c3, /^Error \(unknown_tool\): There is no tool named "raed"\. Did you mean "read"\?/)
    assert.match(text.c4, /^Error \(timeout\): /)
    assert.match(text.c5, /^Error \(invalid_arguments\): /)
    assert.match(text.c6, /^7\n\[arguments adjusted before running: /) // 7 → "7": the gate's type repair
  })

  it('reaches the gate with a call the Runner invokes outside a run (no call id, no signal)', async () => {
    const gate = new ToolExecutor({ otel: false })
    gate.register({ name: 'read', readOnly: true, parameters: ID, handler: ({ id }, ctx) => `${id} ${ctx.callId.startsWith('call_')}` })
    const [read] = openAiAgentsTools(gate)
    assert.equal(await read.invoke({ context: {} }, '{"id":"a",}'), 'a true\n[arguments adjusted before running: trailing commas in the JSON]')
  })
})

describe('toolgate/openai-agents: what the Runner does not hand to tools', () => {
  it("hands a call whose arguments are not JSON to the gate's repair, and the model reads its own text back", async () => {
    const seen = []
    const gate = new ToolExecutor({ otel: false })
    gate.register({ name: 'write', parameters: ID, handler: (args) => { seen.push(args); return 'ok' } })
    const { model, agent, runner } = agentOver(gate, [calls(['write', "{'id': 'w', }", 'c1'], ['write', '', 'c2']), done])

    const result = await runner.run(agent, 'Go')

    assert.deepEqual(seen, [{ id: 'w' }])
    const text = Object.fromEntries(resultsIn(model.calls[1]))
    assert.match(text.c1, /^ok\n\[arguments adjusted before running: /)
    // Empty arguments are `{}` for the gate, which then lists what is missing.
    assert.match(text.c2, /^Error \(invalid_arguments\): .*missing required property "id"/s)
    assert.deepEqual(callsIn(model.calls[1]), [['c1', "{'id': 'w', }"], ['c2', '']])
    assert.equal(result.interruptions.length, 0)
  })

  it('(why the model wrapper exists) leaves the Runner to turn such a call into an approval request without it', async () => {
    const gate = new ToolExecutor({ otel: false })
    let ran = 0
    gate.register({ name: 'write', parameters: ID, handler: () => { ran += 1; return 'ok' } })
    const { agent, runner } = agentOver(gate, [calls(['write', '{"id": "w",}', 'c1']), done], { wrap: false })

    const result = await runner.run(agent, 'Go')

    assert.deepEqual(result.interruptions.map((i) => i.rawItem.callId), ['c1'])
    assert.equal(ran, 0)
  })

  it('streams too: the streamed response is read the same way', async () => {
    const seen = []
    const gate = new ToolExecutor({ otel: false })
    gate.register({ name: 'write', parameters: ID, handler: (args) => { seen.push(args); return 'ok' } })
    const { model, agent, runner } = agentOver(gate, [calls(['write', '{"id": "w",}', 'c1']), done])

    const stream = await runner.run(agent, 'Go', { stream: true })
    for await (const _event of stream) { /* consumed */ }
    await stream.completed

    assert.equal(stream.finalOutput, 'done')
    assert.deepEqual(seen, [{ id: 'w' }])
    assert.deepEqual(callsIn(model.calls[1]), [['c1', '{"id": "w",}']])
    assert.ok(model.calls.every((call) => call.streamed))
  })

  it("answers a name the agent has no tool for with the gate's lookup, running nothing", async () => {
    const rec = recorder()
    const gate = new ToolExecutor({ otel: false })
    gate.register({ name: 'read_file', readOnly: true, parameters: ID, handler: rec.handler(1) })
    const { model, agent, runner } = agentOver(gate, [calls(['readFile', { id: 'a' }, 'c1']), done])

    await runner.run(agent, 'Go')

    const [[callId, text]] = resultsIn(model.calls[1])
    assert.equal(callId, 'c1')
    assert.equal(text, 'Error (unknown_tool): There is no tool named "readFile". Did you mean "read_file"? Available tools: read_file. Call one of these by its exact name.')
    assert.deepEqual(rec.events, [])
  })

  it("leaves the SDK's answer to a call of one of its deferred tools not loaded yet (load it with tool_search)", async () => {
    const gate = new ToolExecutor({ otel: false })
    gate.register({ name: 'read_file', readOnly: true, parameters: ID, handler: () => 'ok' })
    const lazy = tool({ name: 'lazy', description: 'Loaded on demand.', parameters: { type: 'object', properties: {}, additionalProperties: false }, deferLoading: true, execute: () => 'ran' })
    const model = new ScriptedModel([calls(['lazy', {}, 'c1']), done])
    const agent = new Agent({ name: 'assistant', model: openAiAgentsModel(gate, model), tools: [...openAiAgentsTools(gate), lazy, toolSearchTool()] })
    await new Runner({ tracingDisabled: true, ...openAiAgentsRunConfig(gate) }).run(agent, 'Go')
    assert.match(resultsIn(model.calls[1])[0][1], /^Error: Tool lazy is not loaded for the current agent\. .*Call tool_search to load it/)
  })

  it('(why the run options exist) leaves such a name to fail the whole run without them', async () => {
    const gate = new ToolExecutor({ otel: false })
    gate.register({ name: 'read_file', readOnly: true, parameters: ID, handler: () => 'ok' })
    const { agent, runner } = agentOver(gate, [calls(['readFile', { id: 'a' }, 'c1']), done], { runConfig: false })
    await assert.rejects(runner.run(agent, 'Go'), ModelBehaviorError)
  })
})

describe('toolgate/openai-agents: approvals', () => {
  /** A gate whose `approve` is the adapter's, with a fallback that records what reaches it. */
  function approvingGate() {
    const fallbackAsks = []
    const gateAsks = []
    const bridge = openAiAgentsApproval((request) => {
      fallbackAsks.push(request.callId)
      return { decision: 'deny', reason: 'the app said no' }
    })
    const gate = new ToolExecutor({
      otel: false,
      permissions: { ask: [{ tool: 'write', args: { id: 'prod*' } }] },
      approve: (request) => {
        gateAsks.push(request.callId)
        return bridge(request)
      },
    })
    const deployed = []
    gate.register({ name: 'deploy', needsApproval: true, parameters: ID, handler: ({ id }) => { deployed.push(id); return `deployed ${id}` } })
    gate.register({ name: 'write', parameters: ID, handler: ({ id }) => `wrote ${id}` })
    return { gate, fallbackAsks, gateAsks, deployed }
  }

  it('interrupts the run; a rejected call is refused by the gate, an approved one runs without asking approve again', async () => {
    const { gate, fallbackAsks, gateAsks, deployed } = approvingGate()
    const { model, agent, runner } = agentOver(gate, [calls(['deploy', { id: 'd1' }, 'c1']), calls(['deploy', { id: 'd2' }, 'c2']), done])

    let result = await runner.run(agent, 'Deploy')
    assert.deepEqual(result.interruptions.map((i) => i.rawItem.callId), ['c1'])
    assert.equal(model.calls.length, 1)

    result.state.reject(result.interruptions[0])
    result = await runner.run(agent, result.state)
    assert.deepEqual(resultsIn(model.calls[1]), [[
      'c1',
      'Error (permission_denied): Tool "deploy" is not allowed here: refused by the rule deny deploy (context permissions) (the user rejected this call when asked to approve it). Do not call it again this way; continue with what you may do, or tell the user what you could not do.',
    ]])
    assert.deepEqual(result.interruptions.map((i) => i.rawItem.callId), ['c2'])

    // Written out and read back, as an app keeps a paused run until its user answers.
    const state = await RunState.fromString(agent, result.state.toString())
    state.approve(state.getInterruptions()[0])
    result = await runner.run(agent, state)

    assert.equal(result.finalOutput, 'done')
    assert.deepEqual(resultsIn(model.calls[2]).at(-1), ['c2', 'deployed d2'])
    assert.deepEqual(deployed, ['d2'])
    assert.deepEqual(gateAsks, ['c2']) // the rejected call was refused before any ask; the approved one was heard
    assert.deepEqual(fallbackAsks, [])
  })

  it('puts to the fallback an ask the run did not interrupt for (an ask rule), and denies it without one', async () => {
    const { gate, fallbackAsks } = approvingGate()
    const { model, agent, runner } = agentOver(gate, [calls(['write', { id: 'prod-db' }, 'c1'], ['write', { id: 'dev' }, 'c2']), done])
    const result = await runner.run(agent, 'Write')
    assert.equal(result.interruptions.length, 0)
    assert.deepEqual(fallbackAsks, ['c1'])
    const text = Object.fromEntries(resultsIn(model.calls[1]))
    assert.match(text.c1, /^Error \(approval_denied\): .*declined: the app said no/)
    assert.equal(text.c2, 'wrote dev')

    const bare = new ToolExecutor({ otel: false, approve: openAiAgentsApproval() })
    bare.register({ name: 'shell', needsApproval: true, handler: () => 'ran' })
    const [outsideARun] = await bare.execute([{ name: 'shell' }])
    assert.match(outsideARun.error, /declined: an Agents SDK run puts to its user only the calls of tools registered with needsApproval/)
  })

  it('never runs a rejected call, even where the gate would not ask (approvedTools, acceptAll) or an approve callback says yes', async () => {
    const { gate, deployed } = approvingGate()
    const context = { approvedTools: ['deploy'], permissions: { mode: 'acceptAll' } }
    const { model, agent, runner } = agentOver(gate, [calls(['deploy', { id: 'd1' }, 'c1']), done])
    let result = await runner.run(agent, 'Deploy', { context })
    result.state.reject(result.interruptions[0])
    result = await runner.run(agent, result.state)
    assert.equal(result.finalOutput, 'done')
    assert.deepEqual(deployed, [])
    assert.match(resultsIn(model.calls[1])[0][1], /^Error \(permission_denied\): .*the user rejected this call/)

    const yes = new ToolExecutor({ otel: false, approve: () => 'approve' })
    const ran = []
    yes.register({ name: 'deploy', needsApproval: true, parameters: ID, handler: ({ id }) => { ran.push(id); return 'deployed' } })
    const over = agentOver(yes, [calls(['deploy', { id: 'd1' }, 'c1']), done])
    let again = await over.runner.run(over.agent, 'Deploy')
    again.state.reject(again.interruptions[0])
    again = await over.runner.run(over.agent, again.state)
    assert.equal(again.finalOutput, 'done')
    assert.deepEqual(ran, [], 'an approve callback that says yes cannot run a call the user rejected')
  })

  it('gives each run its own turn, even two runs under one context', async () => {
    const log = []
    const gate = new ToolExecutor({ otel: false })
    gate.register({ name: 'write', parameters: ID, handler: async ({ id }) => { log.push(`start ${id}`); await sleep(30); log.push(`end ${id}`); return id } })
    const context = { userId: 'u' }
    const runs = ['a', 'b'].map((id) => {
      const { agent, runner } = agentOver(gate, [calls(['write', { id }, `c_${id}`]), done])
      return runner.run(agent, 'Write', { context })
    })
    await Promise.all(runs)
    assert.equal(gate.stats().total.calls, 2)
    assert.deepEqual(log.slice(0, 2).sort(), ['start a', 'start b'], 'two runs: their writes need not wait for each other')
  })
})

describe('toolgate/openai-agents: time, cancellation, context', () => {
  it("answers a call past its limit with the gate's timeout, and the run goes on", async () => {
    const gate = new ToolExecutor({ otel: false })
    gate.register({ name: 'read', readOnly: true, parameters: ID, timeoutMs: 50, handler: () => never() })
    const { model, agent, runner } = agentOver(gate, [calls(['read', { id: 'a' }, 'c1']), done])
    const started = Date.now()
    const result = await runner.run(agent, 'Go')
    assert.ok(Date.now() - started < 5_000)
    assert.equal(result.finalOutput, 'done')
    assert.match(resultsIn(model.calls[1])[0][1], /^Error \(timeout\): Tool "read" did not finish within its time limit of 50 ms/)
  })

  it("cancels the turn through the run's abort signal: running handlers are aborted, waiting ones never start", async () => {
    const records = []
    const gate = new ToolExecutor({ otel: false, audit: { onRecord: (r) => records.push(r) } })
    const started = deferred()
    let aborted
    let wrote = 0
    gate.register({
      name: 'read',
      readOnly: true,
      parameters: ID,
      handler: (_args, { signal }) => {
        started.resolve()
        return untilAborted(signal).catch((reason) => { aborted = reason; throw reason })
      },
    })
    gate.register({ name: 'write', parameters: ID, handler: () => { wrote += 1; return 'ok' } })
    const { agent, runner } = agentOver(gate, [calls(['read', { id: 'a' }, 'c1'], ['write', { id: 'w' }, 'c2']), done])
    const controller = new AbortController()
    const stop = new Error('the user pressed stop')
    started.promise.then(() => controller.abort(stop))

    await assert.rejects(runner.run(agent, 'Go', { signal: controller.signal }), (err) => err === stop)

    assert.equal(aborted, stop)
    assert.equal(wrote, 0)
    assert.equal(gate.running, 0)
    await new Promise(setImmediate)
    assert.deepEqual(records.map((r) => [r.callId, r.errorKind]), [['c1', 'cancelled'], ['c2', 'cancelled']])
  })

  it("makes the run's context the gate's: what the model is offered, what may run, what handlers see", async () => {
    const seen = []
    const gate = new ToolExecutor({ otel: false })
    gate.register({ name: 'read', readOnly: true, parameters: ID, handler: (_args, ctx) => { seen.push(ctx.context); return 'ok' } })
    gate.register({ name: 'write', parameters: ID, handler: () => 'wrote' })
    const { model, agent, runner } = agentOver(gate, [calls(['read', { id: 'a' }, 'c1'], ['write', { id: 'w' }, 'c2']), done])
    const context = { userId: 'u_42', deniedTools: ['write'] }

    await runner.run(agent, 'Go', { context })

    assert.deepEqual(model.calls[0].request.tools.map((t) => t.name), ['read'])
    assert.equal(seen[0], context)
    assert.match(Object.fromEntries(resultsIn(model.calls[1])).c2, /^Error \(unknown_tool\): There is no tool named "write"\. Available tools: read\./)
  })

  it('takes the context from a function of the run, once per run, so that one response stays one turn', async () => {
    const rec = recorder()
    const contexts = []
    const gate = new ToolExecutor({ otel: false })
    gate.register({ name: 'read', readOnly: true, parameters: ID, handler: async (args, ctx) => { contexts.push(ctx.context); return rec.handler(20)(args) } })
    gate.register({ name: 'write', parameters: ID, handler: rec.handler(20) })
    const toolsOptions = { context: (runContext) => ({ userId: runContext.context.user.id }) }
    const { agent, runner } = agentOver(gate, [calls(['read', { id: 'a' }, 'c1'], ['write', { id: 'w' }, 'c2'], ['read', { id: 'b' }, 'c3']), done], { toolsOptions })

    await runner.run(agent, 'Go', { context: { user: { id: 'u_7' } } })

    assert.deepEqual(contexts[0], { userId: 'u_7' })
    assert.equal(contexts[0], contexts[1])
    assert.ok(rec.index('start:w') > rec.index('end:a') && rec.index('start:b') > rec.index('end:w'), rec.events.join(' '))
  })
})

describe('toolgate/openai-agents: outputs, providers, modules, programmer errors', () => {
  it("passes a result's images to the model as image content after its text", async () => {
    const png = Buffer.from('89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c4890000000d4944415478da63f8ffff3f0005fe02fea7d6a4a20000000049454e44ae426082', 'hex').toString('base64')
    const gate = new ToolExecutor({ otel: false })
    gate.register({ name: 'shot', readOnly: true, handler: () => [{ type: 'text', text: 'the page' }, { type: 'image', data: png, mediaType: 'image/png' }] })
    const { model, agent, runner } = agentOver(gate, [calls(['shot', {}, 'c1']), done])
    await runner.run(agent, 'Go')
    const [[, output]] = resultsIn(model.calls[1])
    assert.deepEqual(output.map((part) => part.type), ['input_text', 'input_image'])
    assert.match(output[0].text, /^the page\n\[image 1: image\/png/)
    assert.equal(output[1].image, `data:image/png;base64,${png}`)
  })

  it('wraps every model a provider gives, for agents that name their model', async () => {
    const gate = new ToolExecutor({ otel: false })
    const seen = []
    gate.register({ name: 'write', parameters: ID, handler: (args) => { seen.push(args); return 'ok' } })
    const model = new ScriptedModel([calls(['write', '{"id": "w",}', 'c1']), done])
    const names = []
    const provider = openAiAgentsModelProvider(gate, { getModel: (name) => { names.push(name); return model } })
    const agent = new Agent({ name: 'assistant', model: 'scripted-1', tools: openAiAgentsTools(gate) })
    const result = await new Runner({ tracingDisabled: true, modelProvider: provider, ...openAiAgentsRunConfig(gate) }).run(agent, 'Go')
    assert.equal(result.finalOutput, 'done')
    assert.deepEqual(seen, [{ id: 'w' }])
    assert.ok(names.every((name) => name === 'scripted-1') && names.length > 0)
  })

  it('loads no copy of the SDK, from ESM or CommonJS, and both give the same objects', async () => {
    const script = `
      const cjs = require('toolgate/openai-agents')
      import('toolgate/openai-agents').then((esm) => {
        const loaded = Object.keys(require.cache).filter((file) => file.includes('@openai'))
        console.log(JSON.stringify({ same: esm.openAiAgentsTools === cjs.openAiAgentsTools && esm.default === cjs, loaded }))
      })`
    const child = await runChild(script)
    assert.equal(child.timedOut, false)
    assert.deepEqual(lastJsonLine(child.stdout), { same: true, loaded: [] })
  })

  it('throws a TypeError at once for a programmer error, saying what to pass', () => {
    const gate = new ToolExecutor({ otel: false })
    const model = new ScriptedModel([])
    const cases = [
      [() => openAiAgentsTools({}), /openAiAgentsTools\(gate, options\?\): gate must be a ToolExecutor/],
      [() => openAiAgentsTools(gate, 'x'), /options must be an object/],
      [() => openAiAgentsTools(gate, { contxt: {} }), /unknown option "contxt"/],
      [() => openAiAgentsTools(gate, { context: 'tenant' }), /context must be the gate's execution context/],
      [() => openAiAgentsRunConfig(null), /openAiAgentsRunConfig\(gate, options\?\): gate must be a ToolExecutor .*; got null$/],
      [() => openAiAgentsModel(gate, 'gpt-5'), /model must be an Agents SDK Model .* wrap the provider with openAiAgentsModelProvider/],
      [() => openAiAgentsModel(model, model), /gate must be a ToolExecutor/],
      [() => openAiAgentsModelProvider(gate, model), /provider must be an Agents SDK ModelProvider/],
      [() => openAiAgentsApproval(true), /fallback must be an approve callback/],
    ]
    for (const [make, message] of cases) assert.throws(make, (err) => err instanceof TypeError && message.test(err.message), String(message))
  })
})
