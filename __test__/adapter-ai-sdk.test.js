'use strict'
// toolgate/ai-sdk against the real AI SDK, majors 5, 6 and 7 (`ai`, `ai6`, `ai7`), each driven by its own mock
// model (MockLanguageModelV2 from 'ai/test', V3 from 'ai6/test', V4 from 'ai7/test'). What the model is sent next
// (the prompt the mock receives on the following step) is what the tests read: the results and their wording, one
// per call id. Handlers record when they start and end, hang, throw or ignore their signal. ai 7 needs Node 22
// (its `engines`): on Node 20 its tests skip themselves.

const { describe, it } = require('node:test')
const assert = require('node:assert/strict')
const { ToolExecutor, forLlm, formatResults } = require('..')
const { aiSdkTools, aiSdkRepairToolCall, aiSdkResponseMessages, ToolResultError } = require('toolgate/ai-sdk')
const { recorder, untilAborted } = require('./helpers')

const NODE_MAJOR = Number(process.versions.node.split('.')[0])

const KEY = { type: 'object', properties: { id: { type: 'string' } }, required: ['id'], additionalProperties: false }

/** What differs between the majors: the package, its mock model and the repair hook's option. */
const MAJORS = {
  5: { pkg: 'ai', test: 'ai/test', mock: 'MockLanguageModelV2', repairKey: 'experimental_repairToolCall' },
  6: { pkg: 'ai6', test: 'ai6/test', mock: 'MockLanguageModelV3', repairKey: 'experimental_repairToolCall' },
  7: { pkg: 'ai7', test: 'ai7/test', mock: 'MockLanguageModelV4', repairKey: 'repairToolCall' },
}

async function load(major) {
  const spec = MAJORS[major]
  const ai = await import(spec.pkg)
  const test = await import(spec.test)
  const usage = major === 5
    ? { inputTokens: 1, outputTokens: 1, totalTokens: 2 }
    : { inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 }, outputTokens: { total: 1, text: 1, reasoning: 0 } }
  const finish = (reason) => (major === 5 ? reason : { unified: reason, raw: reason })
  /**
   * A mock model that answers step i with `steps[i]`: an array of tool calls `[id, name, inputText]`, or a string
   * (its text, and the loop stops). Both doGenerate and doStream, so generateText and streamText read the same.
   */
  function model(steps) {
    const content = (step) => (typeof step === 'string'
      ? [{ type: 'text', text: step }]
      : step.map(([toolCallId, toolName, input]) => ({ type: 'tool-call', toolCallId, toolName, input })))
    const reason = (step) => finish(typeof step === 'string' ? 'stop' : 'tool-calls')
    const chunks = (step) => (typeof step === 'string'
      ? [{ type: 'text-start', id: 't' }, { type: 'text-delta', id: 't', delta: step }, { type: 'text-end', id: 't' }]
      : content(step))
    return new test[spec.mock]({
      doGenerate: steps.map((step) => ({ content: content(step), finishReason: reason(step), usage, warnings: [] })),
      doStream: steps.map((step) => ({
        stream: test.simulateReadableStream({ chunks: [...chunks(step), { type: 'finish', finishReason: reason(step), usage }], chunkDelayInMs: 1 }),
      })),
    })
  }
  /** Runs the loop for up to 5 steps, through generateText or streamText, with the adapter's repair hook. */
  async function loop({ tools, gate, via = 'generateText', ...rest }) {
    const options = { tools, stopWhen: ai.stepCountIs(5), ...(gate ? { [spec.repairKey]: aiSdkRepairToolCall(gate) } : {}), ...rest }
    if (options.prompt === undefined && options.messages === undefined) options.prompt = 'Go.'
    if (via === 'generateText') return ai.generateText(options)
    const stream = ai.streamText(options)
    await stream.consumeStream()
    return { text: await stream.text, steps: await stream.steps }
  }
  /** The tool-result parts of every tool message the model was sent on its call `i` (0-based). */
  const sentResults = (m, i) => {
    const calls = m.doGenerateCalls.length > 0 ? m.doGenerateCalls : m.doStreamCalls
    return calls[i].prompt.filter((message) => message.role === 'tool').flatMap((message) => message.content)
  }
  /** Every message the loop produced (7 keeps the approval pass's messages apart from the steps'). */
  const responseMessages = (result) => result.responseMessages ?? result.response.messages
  return { major, ai, model, loop, sentResults, responseMessages, spec }
}

/** The tool-result parts by call id: each id must appear exactly once. */
function byId(parts) {
  const map = new Map()
  for (const part of parts.filter((p) => p.type === 'tool-result')) {
    assert.ok(!map.has(part.toolCallId), `two results for ${part.toolCallId}: ${JSON.stringify(parts)}`)
    map.set(part.toolCallId, part)
  }
  return map
}

const textOf = (part) => part.output.value

/** A read-only `read` and a state-changing `write`, both recording their start and end. */
function readsAndWrites(options) {
  const rec = recorder()
  const gate = new ToolExecutor(options)
  gate.register({ name: 'read', description: 'Reads.', readOnly: true, parameters: KEY, handler: rec.handler(20) })
  gate.register({ name: 'write', description: 'Writes.', parameters: KEY, handler: rec.handler(20) })
  return { gate, rec }
}

for (const major of [5, 6, 7]) {
  const skip = major === 7 && NODE_MAJOR < 22 ? 'ai 7 requires Node 22 or later (its engines field)' : false
  describe(`AI SDK ${major}`, { skip }, () => {
    it('runs the calls of one step as one turn: reads together, the write alone and in order; one result per call id', async () => {
      const sdk = await load(major)
      const { gate, rec } = readsAndWrites()
      const step = [['r1', 'read', '{"id":"r1"}'], ['r2', 'read', '{"id":"r2"}'], ['w', 'write', '{"id":"w"}'], ['r3', 'read', '{"id":"r3"}'], ['r4', 'read', '{"id":"r4"}']]
      const m = sdk.model([step, 'done'])
      const result = await sdk.loop({ model: m, tools: aiSdkTools(gate), gate })
      assert.equal(result.text, 'done')
      // The model is offered the gate's definitions as they are.
      const offered = m.doGenerateCalls[0].tools.map(({ type, name, description, inputSchema }) => ({ type, name, description, inputSchema }))
      assert.deepEqual(offered, gate.definitions('ai-sdk'))
      const at = rec.index
      assert.ok(at('start:r2') < at('end:r1') && at('start:r1') < at('end:r2'), `the reads before the write overlap: ${rec.events}`)
      assert.ok(at('start:w') > Math.max(at('end:r1'), at('end:r2')), `the write starts after the reads before it: ${rec.events}`)
      assert.ok(at('end:w') < Math.min(at('start:r3'), at('start:r4')), `the reads after it wait for it: ${rec.events}`)
      assert.ok(at('start:r4') < at('end:r3'), `the reads after the write overlap: ${rec.events}`)
      const sent = byId(sdk.sentResults(m, 1))
      assert.deepEqual([...sent.keys()].sort(), ['r1', 'r2', 'r3', 'r4', 'w'])
      for (const [id, part] of sent) assert.deepEqual(part.output, { type: 'text', value: id })
      // The output the app reads is the call's ToolResult.
      const outputs = result.steps[0].content.filter((p) => p.type === 'tool-result').map((p) => p.output)
      assert.deepEqual(outputs.map((r) => [r.callId, r.success, r.name]), step.map(([id, name]) => [id, true, name]))
    })

    it('gives two runs at once their own turns, with no signal or context to tell them apart', async () => {
      const sdk = await load(major)
      const { gate, rec } = readsAndWrites()
      const tools = aiSdkTools(gate)
      await Promise.all(['a', 'b'].map((id) => sdk.loop({ model: sdk.model([[[id, 'write', `{"id":"${id}"}`]], 'done']), tools, gate })))
      assert.ok(rec.index('start:b') < rec.index('end:a') && rec.index('start:a') < rec.index('end:b'), `two runs' writes do not wait for each other: ${rec.events}`)
    })

    it('answers a call named after an Object member (toString, constructor) as an unknown tool', async () => {
      const sdk = await load(major)
      const { gate } = readsAndWrites()
      const m = sdk.model([[['p', 'toString', '{}'], ['q', 'constructor', '{}'], ['r', 'read', '{"id":"r"}']], 'done'])
      const result = await sdk.loop({ model: m, tools: aiSdkTools(gate), gate })
      assert.equal(result.text, 'done')
      const sent = sdk.sentResults(m, 1)
      const text = (id) => JSON.stringify(sent.filter((part) => part.toolCallId === id))
      for (const id of ['p', 'q']) assert.match(text(id), /Error \(unknown_tool\)/, text(id))
      assert.match(text('r'), /"value":"r"/)
    })

    it('contrast: the SDK running the same handlers itself starts the write while the reads run', async () => {
      const sdk = await load(major)
      const rec = recorder()
      const tools = {
        read: { description: 'Reads.', inputSchema: sdk.ai.jsonSchema(KEY), execute: rec.handler(20) },
        write: { description: 'Writes.', inputSchema: sdk.ai.jsonSchema(KEY), execute: rec.handler(20) },
      }
      await sdk.loop({ model: sdk.model([[['r1', 'read', '{"id":"r1"}'], ['w', 'write', '{"id":"w"}']], 'done']), tools })
      assert.ok(rec.index('start:w') < rec.index('end:r1'), `the SDK alone overlaps them: ${rec.events}`)
    })

    it('keeps the order through streamText', async () => {
      const sdk = await load(major)
      const { gate, rec } = readsAndWrites()
      const m = sdk.model([[['r1', 'read', '{"id":"r1"}'], ['w', 'write', '{"id":"w"}'], ['r2', 'read', '{"id":"r2"}']], 'done'])
      const result = await sdk.loop({ model: m, tools: aiSdkTools(gate), gate, via: 'streamText' })
      assert.equal(result.text, 'done')
      assert.deepEqual(rec.events, ['start:r1', 'end:r1', 'start:w', 'end:w', 'start:r2', 'end:r2'])
      assert.deepEqual([...byId(sdk.sentResults(m, 1)).keys()], ['r1', 'w', 'r2'])
    })

    it('reads a context the app changed since an approved call ran afresh, even within one turn of the event loop', async () => {
      const gate = new ToolExecutor()
      const ran = []
      gate.register({ name: 'deploy', needsApproval: true, parameters: KEY, handler: ({ id }) => (ran.push(id), id) })
      const tools = aiSdkTools(gate)
      const session = {}
      const approvedRun = async (id) => {
        tools.deploy.needsApproval({ id }, { toolCallId: id, messages: [] }) // the SDK asks its user, who approves
        return tools.deploy.execute({ id }, { toolCallId: id, messages: [], experimental_context: session })
      }
      assert.equal((await approvedRun('a')).output, 'a')
      session.deniedTools = ['deploy']
      await assert.rejects(approvedRun('b'), (err) => err.result?.errorKind === 'unknown_tool', 'a denied tool is one the context does not know')
      assert.deepEqual(ran, ['a'])
      await gate.close()
    })

    it('under streamText, the calls of a step streamed far apart run as one turn of the gate, reads together and the write in its place', async () => {
      const sdk = await load(major)
      const traces = new Set()
      const rec = recorder()
      const gate = new ToolExecutor({ audit: { onRecord: (record) => traces.add(record.traceId) } })
      gate.register({ name: 'read', readOnly: true, parameters: KEY, handler: rec.handler(60) })
      gate.register({ name: 'write', parameters: KEY, handler: rec.handler(60) })
      const call = (id, name) => ({ type: 'tool-call', toolCallId: id, toolName: name, input: `{"id":"${id}"}` })
      const usage = major === 5 ? { inputTokens: 1, outputTokens: 1, totalTokens: 2 } : { inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 }, outputTokens: { total: 1, text: 1, reasoning: 0 } }
      const finish = (reason) => (major === 5 ? reason : { unified: reason, raw: reason })
      const chunks = [call('r1', 'read'), call('r2', 'read'), call('w', 'write'), call('r3', 'read'), { type: 'finish', finishReason: finish('tool-calls'), usage }]
      const test = await import(sdk.spec.test)
      const m = new test[sdk.spec.mock]({
        doStream: [
          { stream: test.simulateReadableStream({ chunks, chunkDelayInMs: 25 }) },
          { stream: test.simulateReadableStream({ chunks: [{ type: 'text-start', id: 't' }, { type: 'text-delta', id: 't', delta: 'done' }, { type: 'text-end', id: 't' }, { type: 'finish', finishReason: finish('stop'), usage }] }) },
        ],
      })
      const result = await sdk.loop({ model: m, tools: aiSdkTools(gate), gate, via: 'streamText' })
      assert.equal(result.text, 'done')
      assert.ok(rec.index('start:r2') < rec.index('end:r1'), `the reads ran together: ${rec.events}`)
      assert.ok(rec.index('start:w') > rec.index('end:r2'), `the write waited for both reads: ${rec.events}`)
      assert.ok(rec.index('start:r3') > rec.index('end:w'), `the read after the write waited for it: ${rec.events}`)
      assert.equal(traces.size, 1, 'one turn of the gate for the step')
      assert.deepEqual([...byId(sdk.sentResults(m, 1)).keys()], ['r1', 'r2', 'w', 'r3'])
    })

    it('calls handed over one by one as the model streams them (each started when parsed) join the step\'s streaming turn', async () => {
      const traces = new Set()
      const rec = recorder()
      const gate = new ToolExecutor({ audit: { onRecord: (record) => traces.add(record.traceId) } })
      gate.register({ name: 'read', readOnly: true, parameters: KEY, handler: rec.handler(250) })
      gate.register({ name: 'write', parameters: KEY, handler: rec.handler(250) })
      const tools = aiSdkTools(gate)
      const messages = []
      const started = []
      for (const [id, name] of [['r1', 'read'], ['r2', 'read'], ['w', 'write'], ['r3', 'read']]) {
        started.push(tools[name].execute({ id }, { toolCallId: id, messages, abortSignal: undefined }))
        await new Promise((resolve) => setTimeout(resolve, 20))
      }
      const outputs = await Promise.all(started)
      assert.deepEqual(outputs.map((o) => o.output), ['r1', 'r2', 'w', 'r3'])
      assert.ok(rec.index('start:r2') < rec.index('end:r1'), `r2, handed over 20 ms after r1, ran beside it: ${rec.events}`)
      assert.ok(rec.index('start:w') > rec.index('end:r2'), `the write waited for both reads: ${rec.events}`)
      assert.ok(rec.index('start:r3') > rec.index('end:w'), `the read after the write waited for it: ${rec.events}`)
      await new Promise((resolve) => setTimeout(resolve, 5)) // its audit records are written once it has ended
      assert.equal(traces.size, 1, 'one turn of the gate for the step')
      const later = await tools.read.execute({ id: 'r4' }, { toolCallId: 'r4', messages, abortSignal: undefined })
      assert.equal(later.output, 'r4')
      await new Promise((resolve) => setTimeout(resolve, 5))
      assert.equal(traces.size, 2, 'a call of the step after every call before it settled opens the next turn')
      await gate.close()
    })

    it('hands input that is not JSON to the gate, whose repair runs it; the model reads the repair note', async () => {
      const sdk = await load(major)
      const { gate, rec } = readsAndWrites()
      const m = sdk.model([[['bad', 'read', "{id: 'r9',}"], ['ok', 'read', '{"id":"r1"}']], 'done'])
      await sdk.loop({ model: m, tools: aiSdkTools(gate), gate })
      assert.ok(rec.events.includes('start:r9'), 'the handler ran with the repaired arguments')
      const sent = byId(sdk.sentResults(m, 1))
      assert.equal(sent.size, 2)
      assert.deepEqual(sent.get('bad').output, { type: 'text', value: 'r9\n[arguments adjusted before running: unquoted keys in the JSON; single quotes in the JSON; trailing commas in the JSON]' })
    })

    it('without the repair hook the SDK answers input that is not JSON itself, and no handler runs', async () => {
      const sdk = await load(major)
      const { gate, rec } = readsAndWrites()
      const m = sdk.model([[['bad', 'read', "{id: 'r9',}"]], 'done'])
      await sdk.loop({ model: m, tools: aiSdkTools(gate) })
      assert.deepEqual(rec.events, [])
      const part = byId(sdk.sentResults(m, 1)).get('bad')
      assert.equal(part.output.type, 'error-text')
      assert.match(textOf(part), /Invalid input for tool read/)
    })

    it("answers an unknown name with the gate's lookup: the model reads its unknown_tool text", async () => {
      const sdk = await load(major)
      const { gate, rec } = readsAndWrites()
      const m = sdk.model([[['u', 'reed', '{"id":"x"}'], ['r', 'read', '{"id":"r1"}']], 'done'])
      await sdk.loop({ model: m, tools: aiSdkTools(gate), gate })
      assert.deepEqual(rec.events, ['start:r1', 'end:r1'])
      const sent = byId(sdk.sentResults(m, 1))
      assert.equal(sent.size, 2)
      const unknown = sent.get('u')
      assert.equal(unknown.output.type, 'error-text')
      // The SDK words a throwing repair hook "Error repairing tool call: …" (7 also names the error class first).
      const wrapper = major === 7 ? 'AI_ToolCallRepairError: Error repairing tool call: ' : 'Error repairing tool call: '
      assert.equal(textOf(unknown), `${wrapper}Error (unknown_tool): There is no tool named "reed". Did you mean "read"? Available tools: read, write. Call one of these by its exact name.`)
    })

    it('runs a call whose name the gate repairs (repair.toolNames) under that name, in its step', async () => {
      const sdk = await load(major)
      const { gate, rec } = readsAndWrites({ repair: { toolNames: true } })
      const m = sdk.model([[['r1', 'read', '{"id":"r1"}'], ['w', 'Write', "{id: 'w'}"], ['r2', 'read', '{"id":"r2"}']], 'done'])
      await sdk.loop({ model: m, tools: aiSdkTools(gate), gate })
      assert.deepEqual(rec.events, ['start:r1', 'end:r1', 'start:w', 'end:w', 'start:r2', 'end:r2'])
      const sent = byId(sdk.sentResults(m, 1))
      assert.equal(sent.get('w').toolName, 'write')
      assert.match(textOf(sent.get('w')), /^w\n\[arguments adjusted before running: /)
    })

    it('leaves the calls of tools that are not the gate\'s to the SDK', async () => {
      const sdk = await load(major)
      const { gate } = readsAndWrites()
      let ran = 0
      const own = { description: 'Not the gate\'s.', inputSchema: sdk.ai.jsonSchema(KEY), execute: () => { ran += 1; return 'own' } }
      const m = sdk.model([[['o', 'own', "{id: 'x',}"]], 'done'])
      await sdk.loop({ model: m, tools: { ...aiSdkTools(gate), own }, gate })
      assert.equal(ran, 0)
      assert.match(textOf(byId(sdk.sentResults(m, 1)).get('o')), /Invalid input for tool own/)
    })

    it('sends a failed call as the SDK\'s error result with the gate\'s text: a timeout, a throw', async () => {
      const sdk = await load(major)
      const gate = new ToolExecutor({ retry: false })
      gate.register({ name: 'hang', readOnly: true, timeoutMs: 50, handler: () => new Promise(() => {}) })
      gate.register({ name: 'boom', readOnly: true, handler: () => { throw new Error('disk full') } })
      const m = sdk.model([[['h', 'hang', '{}'], ['b', 'boom', '{}']], 'done'])
      const result = await sdk.loop({ model: m, tools: aiSdkTools(gate), gate })
      const errors = result.steps[0].content.filter((p) => p.type === 'tool-error')
      assert.deepEqual(errors.map((p) => [p.toolCallId, p.error instanceof ToolResultError, p.error.result.errorKind]), [['h', true, 'timeout'], ['b', true, 'handler_error']])
      const sent = byId(sdk.sentResults(m, 1))
      for (const part of errors) assert.deepEqual(sent.get(part.toolCallId).output, { type: 'error-text', value: forLlm(part.error.result) })
      assert.match(textOf(sent.get('h')), /^Error \(timeout\): Tool "hang" did not finish within its time limit of 50 ms/)
      assert.match(textOf(sent.get('b')), /^Error \(handler_error\): Tool "boom" failed: Error: disk full/)
    })

    it("cancels through the SDK's abortSignal: the handler's signal aborts, the step records the gate's cancelled result", async () => {
      const sdk = await load(major)
      const gate = new ToolExecutor()
      let handlerSignal
      gate.register({ name: 'wait', readOnly: true, handler: (_args, { signal }) => { handlerSignal = signal; return untilAborted(signal) } })
      const controller = new AbortController()
      const steps = []
      setTimeout(() => controller.abort(new Error('user pressed stop')), 30)
      await assert.rejects(
        sdk.loop({ model: sdk.model([[['c', 'wait', '{}']], 'done']), tools: aiSdkTools(gate), gate, abortSignal: controller.signal, onStepFinish: (s) => steps.push(s) }),
        /user pressed stop/,
      )
      assert.equal(handlerSignal.aborted, true)
      const [error] = steps[0].content.filter((p) => p.type === 'tool-error')
      assert.equal(error.error.result.errorKind, 'cancelled')
      assert.match(error.error.message, /^Error \(cancelled\): Tool "wait" was stopped while running: the turn was cancelled \(aborted by the caller: user pressed stop\)/)
    })

    it("makes the SDK's context the gate's context, and the adapter's context the fallback and the filter", async () => {
      const sdk = await load(major)
      const seen = []
      const gate = new ToolExecutor()
      gate.register({ name: 'read', readOnly: true, parameters: KEY, handler: ({ id }, { context }) => { seen.push([id, context]); return id } })
      gate.register({ name: 'write', parameters: KEY, handler: () => 'written' })
      const runContext = { userId: 'u_1' }
      const sdkContext = major === 7 ? { toolsContext: { read: runContext } } : { experimental_context: runContext }
      await sdk.loop({ model: sdk.model([[['a', 'read', '{"id":"a"}']], 'done']), tools: aiSdkTools(gate), ...sdkContext })
      assert.equal(seen[0][1], runContext)
      const adapterContext = { allowedTools: ['read'], tenantId: 't_1' }
      const tools = aiSdkTools(gate, { context: adapterContext })
      assert.deepEqual(Object.keys(tools), ['read'])
      const m = sdk.model([[['b', 'read', '{"id":"b"}'], ['w', 'write', '{"id":"w"}']], 'done'])
      await sdk.loop({ model: m, tools, [sdk.spec.repairKey]: aiSdkRepairToolCall(gate, { context: adapterContext }) })
      assert.equal(seen[1][1], adapterContext)
      // The SDK's tool set lacks the tool this context may not use; the gate's lookup answers it as no tool at all.
      assert.match(textOf(byId(sdk.sentResults(m, 1)).get('w')), /Error \(unknown_tool\): There is no tool named "write"\. Available tools: read\./)
    })

    it('sends images as the part the major takes (version option)', async () => {
      const sdk = await load(major)
      const gate = new ToolExecutor()
      const png = Buffer.from('89504e470d0a1a0a', 'hex').toString('base64')
      gate.register({ name: 'shot', readOnly: true, handler: () => [{ type: 'text', text: 'a screenshot' }, { type: 'image', data: png, mediaType: 'image/png' }] })
      const m = sdk.model([[['s', 'shot', '{}']], 'done'])
      await sdk.loop({ model: m, tools: aiSdkTools(gate, { version: major }), gate })
      const sent = byId(sdk.sentResults(m, 1)).get('s')
      const [result] = await gate.execute([{ id: 's', name: 'shot' }])
      const expected = formatResults([result], 'ai-sdk', { version: major }).content[0].output
      // As JSON: 7 writes the keys it does not fill (filename, providerOptions) as undefined.
      assert.deepEqual(JSON.parse(JSON.stringify(sent.output)), expected)
      assert.deepEqual(sent.output.value.map((p) => p.type), ['text', { 5: 'media', 6: 'image-data', 7: 'file' }[major]])
    })

    if (major === 5) {
      it("has no approval flow: a needsApproval tool asks the gate's approve callback, declined then approved", async () => {
        const sdk = await load(major)
        const answers = [false, true]
        const asked = []
        const gate = new ToolExecutor({ approve: ({ callId }) => { asked.push(callId); return answers.shift() } })
        let deployed = 0
        gate.register({ name: 'deploy', needsApproval: true, handler: () => { deployed += 1; return 'deployed' } })
        const m = sdk.model([[['a', 'deploy', '{}']], [['b', 'deploy', '{}']], 'done'])
        await sdk.loop({ model: m, tools: aiSdkTools(gate), gate })
        assert.deepEqual(asked, ['a', 'b'])
        assert.equal(deployed, 1)
        assert.match(textOf(byId(sdk.sentResults(m, 1)).get('a')), /^Error \(approval_denied\): /)
        assert.deepEqual(byId(sdk.sentResults(m, 2)).get('b').output, { type: 'text', value: 'deployed' })
      })
    } else {
      it(`maps needsApproval to the SDK's approval flow: declined, then approved; the gate does not ask again`, async () => {
        const sdk = await load(major)
        const asked = []
        const gate = new ToolExecutor({ approve: ({ callId }) => { asked.push(callId); return false } })
        const rec = recorder()
        gate.register({ name: 'deploy', needsApproval: true, parameters: KEY, handler: rec.handler(1) })
        const tools = aiSdkTools(gate)
        const m = sdk.model([[['a', 'deploy', '{"id":"a"}']], [['b', 'deploy', '{"id":"b"}']], 'done'])
        const messages = [{ role: 'user', content: 'Deploy.' }]
        const answer = async (approved) => {
          const request = messages.at(-1).content.find((p) => p.type === 'tool-approval-request')
          messages.push({ role: 'tool', content: [{ type: 'tool-approval-response', approvalId: request.approvalId, approved, reason: approved ? undefined : 'not on a Friday' }] })
          messages.push(...sdk.responseMessages(await sdk.loop({ model: m, tools, gate, messages })))
        }
        messages.push(...sdk.responseMessages(await sdk.loop({ model: m, tools, gate, messages })))
        assert.deepEqual(rec.events, [], 'nothing ran before an answer')
        await answer(false)
        assert.deepEqual(rec.events, [], 'a declined call never runs')
        assert.deepEqual(byId(sdk.sentResults(m, 1)).get('a').output, { type: 'execution-denied', reason: 'not on a Friday' })
        await answer(true)
        assert.deepEqual(rec.events, ['start:b', 'end:b'])
        assert.deepEqual(asked, [], "the gate's approve is never called for a call the SDK's user approved")
        const last = byId(sdk.sentResults(m, 2))
        assert.deepEqual([...last.keys()], ['a', 'b'])
        assert.deepEqual(last.get('b').output, { type: 'text', value: 'b' })
        assert.equal(gate.stats().tools.deploy.successes, 1)
      })

      it('holds an approved call to the context as it is now: a deny the app added since still refuses it', async () => {
        const sdk = await load(major)
        const gate = new ToolExecutor()
        const rec = recorder()
        gate.register({ name: 'deploy', needsApproval: true, parameters: KEY, handler: rec.handler(1) })
        const session = {}
        const tools = aiSdkTools(gate)
        const m = sdk.model([[['a', 'deploy', '{"id":"a"}']], [['b', 'deploy', '{"id":"b"}']], 'done', 'done'])
        const messages = [{ role: 'user', content: 'Deploy.' }]
        const context = major === 7 ? { toolsContext: { deploy: session } } : { experimental_context: session }
        const step = async () => messages.push(...sdk.responseMessages(await sdk.loop({ model: m, tools, gate, messages, ...context })))
        const approve = () => {
          const request = messages.at(-1).content.find((p) => p.type === 'tool-approval-request')
          messages.push({ role: 'tool', content: [{ type: 'tool-approval-response', approvalId: request.approvalId, approved: true }] })
        }
        await step()
        approve()
        await step()
        assert.deepEqual(rec.events, ['start:a', 'end:a'])
        session.deniedTools = ['deploy']
        approve()
        await step()
        assert.deepEqual(rec.events, ['start:a', 'end:a'], 'the second approved call was refused by the deny added since')
      })

      it('asks the gate when the SDK did not ask its user (an app-level approval that skips the tool\'s own)', async () => {
        const sdk = await load(major)
        const asked = []
        const gate = new ToolExecutor({ approve: ({ callId }) => { asked.push(callId); return false } })
        gate.register({ name: 'deploy', needsApproval: true, handler: () => 'deployed' })
        const tools = aiSdkTools(gate)
        // A tool set whose deploy runs without asking the SDK's user: the gate's own approval still holds.
        const unguarded = { deploy: { ...tools.deploy, needsApproval: undefined } }
        const m = sdk.model([[['a', 'deploy', '{}']], 'done'])
        await sdk.loop({ model: m, tools: unguarded, gate })
        assert.deepEqual(asked, ['a'])
        assert.match(textOf(byId(sdk.sentResults(m, 1)).get('a')), /^Error \(approval_denied\): /)
      })
    }

    it('manual flow: aiSdkResponseMessages keeps one result per call id where pushing both sends two', async () => {
      const sdk = await load(major)
      const { gate, rec } = readsAndWrites()
      const tools = gate.definitions('ai-sdk', { jsonSchema: sdk.ai.jsonSchema })
      const m = sdk.model([[['ok', 'read', '{"id":"r1"}'], ['bad', 'read', "{id: 'r2',}"], ['u', 'nope', '{}']], 'done'])
      const messages = [{ role: 'user', content: 'Go.' }]
      const { toolCalls, response } = await sdk.ai.generateText({ model: m, messages, tools })
      const results = await gate.execute(toolCalls)
      assert.deepEqual(rec.events.filter((e) => e.startsWith('start')), ['start:r1', 'start:r2'])
      const version = { version: major }
      // What the README's flow did: the SDK's answers for bad and u, and the gate's, side by side.
      const both = [...response.messages, formatResults(results, 'ai-sdk', version)].filter((msg) => msg.role === 'tool').flatMap((msg) => msg.content)
      assert.deepEqual(both.map((p) => p.toolCallId).sort(), ['bad', 'bad', 'ok', 'u', 'u'])
      messages.push(...aiSdkResponseMessages(response.messages, results, version))
      await sdk.ai.generateText({ model: m, messages, tools })
      const sent = byId(sdk.sentResults(m, 1))
      assert.deepEqual([...sent.keys()], ['ok', 'bad', 'u'])
      for (const [i, id] of ['ok', 'bad', 'u'].entries()) assert.deepEqual(sent.get(id).output, formatResults([results[i]], 'ai-sdk', version).content[0].output)
      assert.match(textOf(sent.get('u')), /^Error \(unknown_tool\): There is no tool named "nope"/)
    })

    it('takes the jsonSchema helper of the `ai` in use, and the SDK still validates nothing before the gate', async () => {
      const sdk = await load(major)
      const { gate, rec } = readsAndWrites()
      const m = sdk.model([[['x', 'read', '{"id":5}']], 'done'])
      await sdk.loop({ model: m, tools: aiSdkTools(gate, { jsonSchema: sdk.ai.jsonSchema }), gate })
      // The number is repaired to its text by the gate: the SDK did not refuse it first.
      assert.deepEqual(rec.events, ['start:5', 'end:5'])
      assert.match(textOf(byId(sdk.sentResults(m, 1)).get('x')), /^5\n\[arguments adjusted before running: /)
    })
  })
}

describe('toolgate/ai-sdk, apart from a model', () => {
  it('throws a TypeError that says what to fix, at once, for programmer errors', () => {
    const gate = new ToolExecutor()
    assert.throws(() => aiSdkTools({}), { name: 'TypeError', message: /aiSdkTools\(gate, options\?\): gate must be a ToolExecutor/ })
    assert.throws(() => aiSdkTools(gate, { contxt: {} }), { name: 'TypeError', message: /unknown option "contxt" \(known: context, version, jsonSchema\)/ })
    assert.throws(() => aiSdkTools(gate, { version: '7' }), { name: 'TypeError', message: /version must be the AI SDK major, one of 5, 6, 7; got "7"/ })
    assert.throws(() => aiSdkTools(gate, { context: 'u_1' }), { name: 'TypeError', message: /context must be an object/ })
    assert.throws(() => aiSdkTools(gate, { jsonSchema: {} }), { name: 'TypeError', message: /jsonSchema must be the jsonSchema function/ })
    assert.throws(() => aiSdkTools(gate, null), { name: 'TypeError', message: /options must be an object/ })
    assert.throws(() => aiSdkRepairToolCall(null), { name: 'TypeError', message: /aiSdkRepairToolCall\(gate, options\?\): gate must be a ToolExecutor \(new ToolExecutor\(\) from 'toolgate'\); got null/ })
    assert.throws(() => aiSdkRepairToolCall(gate, { version: 7 }), { name: 'TypeError', message: /unknown option "version" \(known: context\)/ })
    assert.throws(() => aiSdkRepairToolCall(gate, { context: { allowedTools: 'read' } }), { name: 'TypeError', message: /allowedTools must be an array/ })
    assert.throws(() => aiSdkTools(gate, { context: { deniedTools: [1] } }), { name: 'TypeError', message: /deniedTools must be an array/ })
    assert.throws(() => aiSdkResponseMessages(undefined, []), { name: 'TypeError', message: /responseMessages must be an array/ })
    assert.throws(() => aiSdkResponseMessages([], [{}]), { name: 'TypeError', message: /results\[0\] is not a ToolResult/ })
    assert.throws(() => aiSdkResponseMessages([], [], { version: 8 }), { name: 'TypeError', message: /aiSdkResponseMessages.*version must be the AI SDK major/ })
  })

  it('is one module whether imported or required (one ToolResultError, one set of tools)', async () => {
    const esm = await import('toolgate/ai-sdk')
    assert.equal(esm.aiSdkTools, aiSdkTools)
    assert.equal(esm.ToolResultError, ToolResultError)
    assert.equal(esm.default.aiSdkRepairToolCall, aiSdkRepairToolCall)
  })

  it('keeps messages that are not the answered results, and drops a tool message left empty', () => {
    const assistant = { role: 'assistant', content: [{ type: 'tool-call', toolCallId: 'a', toolName: 't', input: {} }] }
    const sdkTool = { role: 'tool', content: [{ type: 'tool-result', toolCallId: 'a', toolName: 't', output: { type: 'error-text', value: 'the SDK' } }, { type: 'tool-result', toolCallId: 'other', toolName: 't', output: { type: 'text', value: 'kept' } }] }
    const result = { callId: 'a', name: 't', success: true, output: 'ours', retryable: false, latencyMs: 0, attempts: 1, cached: false, truncated: false, metadata: { stages: [], startedAt: 0 } }
    const merged = aiSdkResponseMessages([assistant, sdkTool], [result])
    assert.deepEqual(merged, [assistant, { role: 'tool', content: [sdkTool.content[1]] }, formatResults([result], 'ai-sdk')])
    assert.deepEqual(aiSdkResponseMessages([assistant, { role: 'tool', content: [sdkTool.content[0]] }], [result]), [assistant, formatResults([result], 'ai-sdk')])
    assert.deepEqual(aiSdkResponseMessages([assistant], []), [assistant])
  })

  it('forgets the oldest approval requests past 10,000, so a forgotten one is asked about by the gate again', async () => {
    const asked = []
    const gate = new ToolExecutor({ approve: ({ callId }) => { asked.push(callId); return true } })
    gate.register({ name: 'deploy', needsApproval: true, handler: () => 'deployed' })
    const { deploy } = aiSdkTools(gate)
    for (let i = 0; i <= 10_000; i++) deploy.needsApproval({}, { toolCallId: `c${i}` })
    await deploy.execute({}, { toolCallId: 'c0' })
    await deploy.execute({}, { toolCallId: 'c10000' })
    assert.deepEqual(asked, ['c0'])
  })
})
