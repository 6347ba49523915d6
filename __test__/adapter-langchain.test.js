'use strict'
// toolgate/langchain against the real @langchain/core and @langchain/langgraph. The model is a scripted chat model
// written against LangChain's public BaseChatModel interface (core ships no fake that emits tool calls): it turns
// OpenAI-style raw calls into an AIMessage the way @langchain/openai does (parseToolCall, makeInvalidToolCall), so
// LangChain itself decides which calls are malformed, and it records every request it gets and the tools bound to
// it. Scheduling is asserted from the handlers' recorded start/end events.

const { describe, it } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { spawnSync } = require('node:child_process')
const { BaseChatModel } = require('@langchain/core/language_models/chat_models')
const { AIMessage, HumanMessage, ToolMessage } = require('@langchain/core/messages')
const { StructuredTool } = require('@langchain/core/tools')
const { parseToolCall, makeInvalidToolCall } = require('@langchain/core/output_parsers/openai_tools')
const { convertToOpenAITool } = require('@langchain/core/utils/function_calling')
const { StateGraph, MessagesAnnotation, START } = require('@langchain/langgraph')
const { ToolNode, toolsCondition: graphToolsCondition, createReactAgent } = require('@langchain/langgraph/prebuilt')
const { ToolExecutor } = require('..')
const { langchainTools, toolNode, toolsCondition } = require('toolgate/langchain')
const { PACKAGE_DIR, recorder, never, untilAborted, runChild, lastJsonLine } = require('./helpers')

const ID = { type: 'object', properties: { id: { type: 'string' }, n: { type: 'integer' } }, required: ['id'] }

/** A chat model that answers each request with the next step of its script: a list of raw OpenAI-style calls
 * (none: a final text answer). `record.requests` holds every request's messages, `record.replies` the messages it
 * answered with, `record.tools` what bindTools got. */
class ScriptedModel extends BaseChatModel {
  constructor(script, record = { requests: [], replies: [], tools: [] }) {
    super({})
    this.script = script
    this.record = record
  }

  _llmType() {
    return 'scripted'
  }

  bindTools(tools) {
    this.record.tools = tools.map((t) => convertToOpenAITool(t))
    return new ScriptedModel(this.script, this.record)
  }

  async _generate(messages) {
    this.record.requests.push(messages)
    const raw = this.script.shift() ?? []
    const toolCalls = []
    const invalidToolCalls = []
    for (const call of raw) {
      try {
        toolCalls.push(parseToolCall(call, { returnId: true }))
      } catch (err) {
        invalidToolCalls.push(makeInvalidToolCall(call, err.message))
      }
    }
    const message = raw.length === 0
      ? new AIMessage('done')
      : new AIMessage({ content: '', tool_calls: toolCalls, invalid_tool_calls: invalidToolCalls, additional_kwargs: { tool_calls: raw } })
    this.record.replies.push(message)
    return { generations: [{ text: '', message }] }
  }
}

/** A raw Chat Completions call; `args` as text is sent as it is (malformed JSON, say). */
const fn = (id, name, args) => ({ id, type: 'function', function: { name, arguments: typeof args === 'string' ? args : JSON.stringify(args) } })

/** The loop of LangGraph's docs: a model node, a tools node, a conditional edge between them (toolgate/langchain's
 * toolsCondition unless told). */
function agentGraph(model, node, condition = toolsCondition) {
  const bound = model.bindTools(node.tools)
  return new StateGraph(MessagesAnnotation)
    .addNode('agent', async (state) => ({ messages: [await bound.invoke(state.messages)] }))
    .addNode('tools', node)
    .addEdge(START, 'agent')
    .addConditionalEdges('agent', condition)
    .addEdge('tools', 'agent')
    .compile()
}

/** `read` (read-only) and `write`, both recording their start/end events, answering `<tool>:<id>`. */
function readWrite(options) {
  const rec = recorder()
  const gate = new ToolExecutor(options)
  const handler = (tool) => {
    const run = rec.handler(20)
    return async (args, ctx) => `${tool}:${await run(args, ctx)}`
  }
  gate.register({ name: 'read', readOnly: true, parameters: ID, handler: handler('read') })
  gate.register({ name: 'write', parameters: ID, handler: handler('write') })
  return { gate, rec }
}

/** The ToolMessages of one request, in order. */
const toolMessagesOf = (request) => request.filter((m) => m.getType() === 'tool')

/** Reads ‖ together, then the write alone, then the reads after it: asserted on the recorded events. */
function assertReadsWriteReads(rec, [r1, r2], w, r3) {
  const at = rec.index
  const order = rec.events.join(' ')
  assert.ok(at(`start:${r2}`) < at(`end:${r1}`) && at(`start:${r1}`) < at(`end:${r2}`), `${r1} ‖ ${r2}: ${order}`)
  assert.ok(at(`start:${w}`) > Math.max(at(`end:${r1}`), at(`end:${r2}`)), `${w} after the reads before it: ${order}`)
  assert.equal(at(`end:${w}`), at(`start:${w}`) + 1, `nothing else runs during ${w}: ${order}`)
  assert.ok(at(`start:${r3}`) > at(`end:${w}`), `${r3} after ${w}: ${order}`)
}

describe('toolNode(gate) in a LangGraph StateGraph loop', () => {
  it('runs the calls of one AIMessage as one turn: reads together, the write alone and in order; the next request has one ToolMessage per call', async () => {
    const { gate, rec } = readWrite()
    const model = new ScriptedModel([[fn('a', 'read', { id: 'a' }), fn('b', 'read', { id: 'b' }), fn('w', 'write', { id: 'w' }), fn('c', 'read', { id: 'c' })]])
    const out = await agentGraph(model, toolNode(gate)).invoke({ messages: [new HumanMessage('go')] })

    assertReadsWriteReads(rec, ['a', 'b'], 'w', 'c')
    const { requests, tools } = model.record
    assert.equal(requests.length, 2)
    const answers = toolMessagesOf(requests[1])
    assert.deepEqual(answers.map((m) => [m.tool_call_id, m.status, m.content, m.name]), [
      ['a', 'success', 'read:a', 'read'], ['b', 'success', 'read:b', 'read'], ['w', 'success', 'write:w', 'write'], ['c', 'success', 'read:c', 'read'],
    ])
    assert.ok(answers.every((m) => m instanceof ToolMessage))
    assert.equal(answers[2].artifact.callId, 'w', 'the whole ToolResult rides along as the artifact')
    assert.equal(out.messages.at(-1).content, 'done')
    // bindTools sent the model the gate's own JSON Schemas.
    assert.deepEqual(tools.map((t) => [t.function.name, t.function.parameters]), gate.list().map((t) => [t.name, t.parameters]))
  })

  it("sends LangChain's invalid_tool_calls to the gate: repaired where certain, answered where not, in the model's order", async () => {
    const { gate, rec } = readWrite()
    const model = new ScriptedModel([[
      fn('a', 'read', { id: 'a' }), fn('b', 'read', { id: 'b' }),
      fn('w', 'write', "{id: 'w',}"),         // unquoted key, single quotes, trailing comma: LangChain cannot parse it
      fn('c', 'read', { id: 'c', n: '3' }),   // parses, but n is a string: the gate's type repair
      fn('x', 'read', '{"id": "x'),           // cut inside a string: nothing certain to repair
    ]])
    await agentGraph(model, toolNode(gate)).invoke({ messages: [new HumanMessage('go')] })

    assert.deepEqual(model.record.replies[0].invalid_tool_calls.map((c) => c.id), ['w', 'x'], 'LangChain itself kept these out of tool_calls')
    // The repaired write kept its place between the reads.
    assertReadsWriteReads(rec, ['a', 'b'], 'w', 'c')
    const next = model.record.requests[1]
    const answers = toolMessagesOf(next)
    assert.deepEqual(answers.map((m) => m.tool_call_id), ['a', 'b', 'w', 'c', 'x'])
    assert.equal(answers[2].status, 'success')
    assert.match(answers[2].content, /^write:w\n\[arguments adjusted before running: .*single quotes/)
    assert.match(answers[3].content, /^read:c\n\[arguments adjusted before running: \/n "3" → 3\]/)
    assert.equal(answers[4].status, 'error')
    assert.match(answers[4].content, /^Error \(invalid_arguments\): /)
    assert.ok(!rec.events.includes('start:x'))
    // What the integrations send back as the assistant's calls (its tool_calls) pairs with the ToolMessages: the
    // answered malformed calls were moved there, in place of the model's message (same id, same position).
    assert.deepEqual(next.map((m) => m.getType()), ['human', 'ai', 'tool', 'tool', 'tool', 'tool', 'tool'])
    const ai = next[1]
    assert.equal(ai.id, model.record.replies[0].id)
    assert.deepEqual(ai.tool_calls.map((c) => [c.id, c.name]), [['a', 'read'], ['b', 'read'], ['w', 'write'], ['c', 'read'], ['x', 'read']])
    assert.deepEqual(ai.invalid_tool_calls, [])
    assert.deepEqual(ai.additional_kwargs.tool_calls.map((c) => c.function.arguments), model.record.replies[0].additional_kwargs.tool_calls.map((c) => c.function.arguments), 'the raw calls stay as the model sent them')
  })

  it("routes a message whose calls are all malformed to the tools with toolgate/langchain's toolsCondition (LangGraph's ends the run)", async () => {
    const script = () => [[fn('w', 'write', "{id: 'w'}")]]
    const theirs = readWrite()
    const unanswered = new ScriptedModel(script())
    const ended = await agentGraph(unanswered, toolNode(theirs.gate), graphToolsCondition).invoke({ messages: [new HumanMessage('go')] })
    assert.equal(ended.messages.at(-1).invalid_tool_calls.length, 1, "LangGraph's condition ends on the malformed call")
    assert.deepEqual(theirs.rec.events, [])

    const ours = readWrite()
    const model = new ScriptedModel(script())
    const out = await agentGraph(model, toolNode(ours.gate)).invoke({ messages: [new HumanMessage('go')] })
    assert.deepEqual(ours.rec.events, ['start:w', 'end:w'])
    assert.deepEqual(toolMessagesOf(model.record.requests[1]).map((m) => [m.tool_call_id, m.status]), [['w', 'success']])
    assert.deepEqual(model.record.requests[1][1].tool_calls.map((c) => c.id), ['w'])
    assert.equal(out.messages.at(-1).content, 'done')
    assert.equal(toolsCondition([new AIMessage('hi')]), '__end__')
    assert.equal(toolsCondition({ messages: [new AIMessage({ content: '', tool_calls: [{ id: 'r', name: 'read', args: {} }] })] }), 'tools')
  })

  it("answers an unknown name with the gate's lookup, listing only the tools the run's context may use", async () => {
    const { gate } = readWrite()
    const model = new ScriptedModel([[fn('u', 'raed', { id: 'u' })]])
    await agentGraph(model, toolNode(gate)).invoke({ messages: [new HumanMessage('go')] }, { context: { deniedTools: ['write'] } })
    const [answer] = toolMessagesOf(model.record.requests[1])
    assert.equal(answer.tool_call_id, 'u')
    assert.equal(answer.status, 'error')
    assert.match(answer.content, /^Error \(unknown_tool\): There is no tool named "raed"/)
    assert.match(answer.content, /read/)
    assert.doesNotMatch(answer.content, /write/, 'a tool the context denies is never offered')
    assert.equal(answer.artifact.errorKind, 'unknown_tool')
  })

  it('asks the approve callback with the run context: declined, the model reads why; asked again, approved, it runs', async () => {
    const asked = []
    const gate = new ToolExecutor({
      approve: (request) => {
        asked.push(request)
        return asked.length === 1 ? { decision: 'deny', reason: 'not before the backup' } : 'approve'
      },
    })
    let deletions = 0
    gate.register({ name: 'delete_file', needsApproval: true, parameters: ID, handler: ({ id }) => { deletions += 1; return `deleted ${id}` } })
    const model = new ScriptedModel([[fn('d1', 'delete_file', { id: 'f' })], [fn('d2', 'delete_file', { id: 'f' })]])
    const context = { userId: 'u_42' }
    await agentGraph(model, toolNode(gate)).invoke({ messages: [new HumanMessage('delete f')] }, { context })

    assert.deepEqual(asked.map((r) => [r.callId, r.toolName, r.arguments, r.context]), [['d1', 'delete_file', { id: 'f' }, context], ['d2', 'delete_file', { id: 'f' }, context]])
    assert.equal(asked[0].context, context, 'the same object the run was given')
    const [declined] = toolMessagesOf(model.record.requests[1])
    assert.equal(declined.status, 'error')
    assert.match(declined.content, /^Error \(approval_denied\): .*not before the backup/)
    const answers = toolMessagesOf(model.record.requests[2])
    assert.deepEqual(answers.map((m) => [m.tool_call_id, m.status, m.content]), [
      ['d1', 'error', declined.content], ['d2', 'success', 'deleted f'],
    ])
    assert.equal(deletions, 1)
  })

  it('answers a handler that hangs past its time limit with a timeout the model reads; the loop goes on', async () => {
    const gate = new ToolExecutor()
    gate.register({ name: 'slow', readOnly: true, timeoutMs: 50, handler: () => never() })
    const model = new ScriptedModel([[fn('s', 'slow', {})]])
    const started = Date.now()
    const out = await agentGraph(model, toolNode(gate)).invoke({ messages: [new HumanMessage('go')] })
    assert.ok(Date.now() - started < 2_000)
    const [answer] = toolMessagesOf(model.record.requests[1])
    assert.equal(answer.status, 'error')
    assert.match(answer.content, /^Error \(timeout\): Tool "slow" did not finish within its time limit of 50 ms/)
    assert.equal(out.messages.at(-1).content, 'done')
  })

  it("cancels the turn through the config's signal: running handlers are aborted with its reason", async () => {
    const gate = new ToolExecutor()
    const signals = []
    gate.register({ name: 'wait', readOnly: true, handler: (_args, ctx) => { signals.push(ctx.signal); return untilAborted(ctx.signal) } })
    gate.register({ name: 'write', parameters: ID, handler: () => 'never reached' })
    const ai = new AIMessage({ content: '', tool_calls: [{ id: 'w1', name: 'wait', args: {} }, { id: 'x', name: 'write', args: { id: 'x' } }] })

    // Invoked as a runnable: the node answers every call, the started one and the one not started.
    const direct = new AbortController()
    setTimeout(() => direct.abort(new Error('user pressed stop')), 30)
    const { messages } = await toolNode(gate).invoke({ messages: [ai] }, { signal: direct.signal })
    assert.deepEqual(messages.map((m) => [m.tool_call_id, m.status, m.artifact.errorKind]), [['w1', 'error', 'cancelled'], ['x', 'error', 'cancelled']])
    assert.match(messages[0].content, /stopped while running: the turn was cancelled \(aborted by the caller: user pressed stop\)/)
    assert.match(messages[1].content, /was not run/)

    // In a graph: LangGraph ends the run on its signal (it rejects); the gate's turn ends with it.
    const graph = new StateGraph(MessagesAnnotation).addNode('tools', toolNode(gate)).addEdge(START, 'tools').compile()
    const run = new AbortController()
    setTimeout(() => run.abort(new Error('run stopped')), 30)
    await assert.rejects(graph.invoke({ messages: [ai] }, { signal: run.signal }), /run stopped/)
    assert.equal(signals.length, 2)
    assert.ok(signals.every((s) => s.aborted))
    assert.equal(String(signals[1].reason), 'Error: run stopped')
    assert.equal(gate.running, 0)
  })

  it("gives handlers the run's LangGraph context, or the adapter's context option, which wins", async () => {
    const seen = []
    const gate = new ToolExecutor()
    gate.register({ name: 'who', readOnly: true, handler: (_args, ctx) => { seen.push(ctx.context); return 'ok' } })
    const script = () => [[fn('1', 'who', {}), fn('2', 'who', {})]]
    const runContext = { userId: 'from the run' }
    const fixed = { userId: 'from the option' }
    await agentGraph(new ScriptedModel(script()), toolNode(gate)).invoke({ messages: [new HumanMessage('go')] }, { context: runContext })
    await agentGraph(new ScriptedModel(script()), toolNode(gate, { context: fixed })).invoke({ messages: [new HumanMessage('go')] }, { context: runContext })
    await agentGraph(new ScriptedModel(script()), toolNode(gate)).invoke({ messages: [new HumanMessage('go')] })
    assert.equal(seen.length, 6)
    assert.ok(seen.slice(0, 2).every((c) => c === runContext))
    assert.ok(seen.slice(2, 4).every((c) => c === fixed))
    assert.deepEqual(seen.slice(4), [undefined, undefined])
  })

  it('takes the inputs LangGraph\'s ToolNode takes: a message list (answered with a list), skipping calls already answered, and a Send', async () => {
    const { gate, rec } = readWrite()
    const node = toolNode(gate)
    const ai = new AIMessage({ content: '', tool_calls: [{ id: 'a', name: 'read', args: { id: 'a' } }, { id: 'b', name: 'read', args: { id: 'b' } }] })
    const answeredA = new ToolMessage({ content: 'read:a', tool_call_id: 'a' })

    const list = await node.invoke([new HumanMessage('go'), ai, answeredA])
    assert.ok(Array.isArray(list))
    assert.deepEqual(list.map((m) => m.tool_call_id), ['b'])
    const sent = await node.invoke({ messages: [], lg_tool_call: { id: 's', name: 'read', args: { id: 's' } } })
    assert.deepEqual(sent.messages.map((m) => [m.tool_call_id, m.content]), [['s', 'read:s']])
    assert.deepEqual(rec.events, ['start:b', 'end:b', 'start:s', 'end:s'])
    assert.ok(node instanceof ToolNode)
  })

  it('refuses what is a wiring mistake with a TypeError that says what to fix', async () => {
    const { gate } = readWrite()
    assert.throws(() => toolNode({ execute: async () => [] }), { name: 'TypeError', message: /gate must be a ToolExecutor from toolgate, got an object/ })
    assert.throws(() => langchainTools(gate, { contxt: {} }), { name: 'TypeError', message: /unknown option "contxt"/ })
    assert.throws(() => toolNode(gate, { context: 'u_42' }), { name: 'TypeError', message: /context must be an object/ })
    assert.throws(() => langchainTools(gate, []), { name: 'TypeError', message: /options must be an object/ })
    await assert.rejects(toolNode(gate).invoke({ messages: [new HumanMessage('hi')] }), { name: 'TypeError', message: /no AIMessage/ })
    await assert.rejects(toolNode(gate).invoke({ rows: [] }), { name: 'TypeError', message: /the input must be a state with messages/ })
  })
})

describe('langchainTools(gate)', () => {
  it('keeps two requests of one tool set apart when neither has a signal: a write sent while another request\'s read runs does not wait for it', async () => {
    const gate = new ToolExecutor()
    gate.register({ name: 'slow_read', description: 'Reads slowly.', readOnly: true, parameters: { type: 'object', properties: {} }, handler: () => new Promise((resolve) => setTimeout(resolve, 400, 'read')) })
    gate.register({ name: 'save', description: 'Saves.', parameters: { type: 'object', properties: {} }, handler: () => 'saved' })
    const tools = Object.fromEntries(langchainTools(gate, { context: { userId: 'service' } }).map((t) => [t.name, t]))
    const started = Date.now()
    const first = tools.slow_read.invoke({ id: 'a1', name: 'slow_read', args: {}, type: 'tool_call' })
    await new Promise((resolve) => setTimeout(resolve, 30))
    await tools.save.invoke({ id: 'b1', name: 'save', args: {}, type: 'tool_call' })
    assert.ok(Date.now() - started < 300, `the second request's write waited ${Date.now() - started} ms for the first's read`)
    await first
    await gate.close()
  })

  it("in LangGraph's own ToolNode: LangChain's validation is skipped so the gate's repairs run; failures are status 'error'; one message is one turn", async () => {
    const { gate, rec } = readWrite()
    gate.register({ name: 'fails', readOnly: true, handler: () => { throw new Error('disk on fire') } })
    const node = new ToolNode(langchainTools(gate))
    const ai = new AIMessage({ content: '', tool_calls: [
      { id: 'a', name: 'read', args: { id: 'a' } }, { id: 'b', name: 'read', args: { id: 'b', n: '3' } },
      { id: 'w', name: 'write', args: { id: 'w' } }, { id: 'c', name: 'read', args: { id: 'c' } },
      { id: 'm', name: 'read', args: { n: 1 } }, { id: 'f', name: 'fails', args: {} },
    ] })
    const { messages } = await node.invoke({ messages: [ai] })

    // LangGraph fans the calls out one by one; they met in one turn of the gate all the same.
    assertReadsWriteReads(rec, ['a', 'b'], 'w', 'c')
    assert.deepEqual(messages.map((m) => [m.tool_call_id, m.status]), [['a', 'success'], ['b', 'success'], ['w', 'success'], ['c', 'success'], ['m', 'error'], ['f', 'error']])
    assert.match(messages[1].content, /^read:b\n\[arguments adjusted before running: \/n "3" → 3\]/)
    assert.match(messages[4].content, /^Error \(invalid_arguments\): .*id/s)
    assert.match(messages[5].content, /^Error \(handler_error\): Tool "fails" failed: Error: disk on fire/)
    assert.ok(messages.every((m) => m instanceof ToolMessage))
  })

  it("keeps LangChain's callbacks (tracing); answers a bare-arguments invoke with the text", async () => {
    const { gate } = readWrite()
    const [read] = langchainTools(gate)
    const seen = []
    const callbacks = [{ handleToolStart: (_tool, input) => seen.push(['start', input]), handleToolEnd: (output) => seen.push(['end', output.content]) }]
    const message = await read.invoke({ id: 't', name: 'read', args: { id: 't' }, type: 'tool_call' }, { callbacks })
    assert.equal(message.content, 'read:t')
    assert.deepEqual(seen, [['start', '{"id":"t"}'], ['end', 'read:t']])
    assert.equal(await read.invoke({ id: 'bare' }), 'read:bare')
    assert.match(await read.invoke({ n: 2 }), /^Error \(invalid_arguments\): /)
    assert.ok(read instanceof StructuredTool)
  })

  it('works in createReactAgent, and so does toolNode(gate): with v2 (one Send per call) the calls still meet in one turn', async () => {
    for (const tools of [(gate) => toolNode(gate), (gate) => langchainTools(gate)]) {
      for (const version of ['v1', 'v2']) {
        const { gate, rec } = readWrite()
        const model = new ScriptedModel([[fn('a', 'read', { id: 'a' }), fn('b', 'read', { id: 'b' }), fn('w', 'write', { id: 'w' }), fn('c', 'read', { id: 'c' })]])
        const agent = createReactAgent({ llm: model, tools: tools(gate), version })
        const out = await agent.invoke({ messages: [new HumanMessage('go')] })
        assertReadsWriteReads(rec, ['a', 'b'], 'w', 'c')
        assert.deepEqual(toolMessagesOf(model.record.requests[1]).map((m) => m.content), ['read:a', 'read:b', 'write:w', 'read:c'])
        assert.equal(out.messages.at(-1).content, 'done')
      }
    }
  })
})

describe('one copy of the framework per app', () => {
  it('the CommonJS entry builds on the CommonJS @langchain/core, the ESM entry on the ESM one', async () => {
    const esm = await import('toolgate/langchain')
    const esmCore = { ...(await import('@langchain/core/messages')), ...(await import('@langchain/core/tools')) }
    const esmGraph = await import('@langchain/langgraph/prebuilt')
    assert.notEqual(esmCore.ToolMessage, ToolMessage, 'two copies are loaded in this process, so the test can tell them apart')
    const { gate } = readWrite()
    const ai = new AIMessage({ content: '', tool_calls: [{ id: 'a', name: 'read', args: { id: 'a' } }] })

    const [cjsMessage] = (await toolNode(gate).invoke({ messages: [ai] })).messages
    const [esmMessage] = (await esm.toolNode(gate).invoke({ messages: [ai] })).messages
    assert.equal(Object.getPrototypeOf(cjsMessage), ToolMessage.prototype)
    assert.equal(Object.getPrototypeOf(esmMessage), esmCore.ToolMessage.prototype)
    assert.ok(esm.toolNode(gate) instanceof esmGraph.ToolNode && !(esm.toolNode(gate) instanceof ToolNode))
    assert.ok(esm.langchainTools(gate)[0] instanceof esmCore.StructuredTool && !(esm.langchainTools(gate)[0] instanceof StructuredTool))
  })

  it('an ESM app that imports toolgate/langchain loads no CommonJS copy of LangChain', async () => {
    const child = await runChild(`
      import('toolgate/langchain').then(async ({ toolNode }) => {
        const { ToolExecutor } = await import('toolgate')
        const { AIMessage } = await import('@langchain/core/messages')
        const gate = new ToolExecutor()
        gate.register({ name: 'echo', readOnly: true, handler: () => 'hi' })
        const { messages } = await toolNode(gate).invoke({ messages: [new AIMessage({ content: '', tool_calls: [{ id: 'e', name: 'echo', args: {} }] })] })
        const cjs = Object.keys(require.cache).filter((file) => file.includes('@langchain'))
        console.log(JSON.stringify({ content: messages[0].content, cjs }))
      })`)
    assert.equal(child.code, 0, child.stderr)
    assert.deepEqual(lastJsonLine(child.stdout), { content: 'hi', cjs: [] })
  })

  it('without @langchain/langgraph installed, langchainTools works and toolNode and toolsCondition say to install it (both entries)', async () => {
    // The package as an app gets it, beside @langchain/core and nothing of LangGraph.
    const app = fs.mkdtempSync(path.join(os.tmpdir(), 'toolgate-no-langgraph-'))
    try {
      const pkg = path.join(app, 'node_modules', 'toolgate')
      fs.mkdirSync(path.join(app, 'node_modules', '@langchain'), { recursive: true })
      fs.symlinkSync(path.join(PACKAGE_DIR, 'node_modules', '@langchain', 'core'), path.join(app, 'node_modules', '@langchain', 'core'))
      fs.mkdirSync(pkg)
      for (const file of ['package.json', 'index.js', 'index.mjs', 'binding.js']) fs.copyFileSync(path.join(PACKAGE_DIR, file), path.join(pkg, file))
      fs.cpSync(path.join(PACKAGE_DIR, 'lib'), path.join(pkg, 'lib'), { recursive: true })
      for (const binary of fs.readdirSync(PACKAGE_DIR).filter((f) => f.endsWith('.node'))) fs.symlinkSync(path.join(PACKAGE_DIR, binary), path.join(pkg, binary))
      const probe = (load) => `
        ${load}.then(({ langchainTools, toolNode, toolsCondition }) => {
          const { ToolExecutor } = require('toolgate')
          const gate = new ToolExecutor().register({ name: 'echo', handler: () => 'hi' })
          const refusal = (fn) => { try { fn() } catch (err) { return err.name + ': ' + err.message } }
          console.log(JSON.stringify({ tools: langchainTools(gate).map((t) => t.name), refusals: [refusal(() => toolNode(gate)), refusal(() => toolsCondition({ messages: [] }))] }))
        })`
      for (const load of ["Promise.resolve(require('toolgate/langchain'))", "import('toolgate/langchain')"]) {
        const child = spawnSync(process.execPath, ['-e', probe(load)], { cwd: app, encoding: 'utf8', timeout: 20_000 })
        assert.equal(child.status, 0, child.stderr)
        assert.deepEqual(lastJsonLine(child.stdout), { tools: ['echo'], refusals: ['toolNode(gate)', 'toolsCondition(state)'].map((fn) => `TypeError: ${fn}: @langchain/langgraph is not installed; install it, or use langchainTools(gate) with your own tool loop`) })
      }
    } finally {
      fs.rmSync(app, { recursive: true, force: true })
    }
  })
})
