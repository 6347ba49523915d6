'use strict'
// The LangChain/LangGraph adapter, written once for both module formats: the entries (langchain.js requires
// @langchain/core and @langchain/langgraph, langchain.mjs imports them) hand in the framework's classes, so an app
// gets tools and messages of the one copy of the framework it loaded itself.

const { ToolExecutor, forLlm } = require('../../index.js')
const { gatherTurns } = require('./turns.js')

const OPTIONS = ['context']
const isObject = (value) => typeof value === 'object' && value !== null && !Array.isArray(value)

function checked(fn, gate, options) {
  if (!(gate instanceof ToolExecutor)) throw new TypeError(`${fn}(gate, options?): gate must be a ToolExecutor from toolgate, got ${describe(gate)}`)
  if (options === undefined) return {}
  if (!isObject(options)) throw new TypeError(`${fn}(gate, options?): options must be an object { context? }, got ${describe(options)}`)
  const unknown = Object.keys(options).filter((key) => !OPTIONS.includes(key))
  if (unknown.length > 0) throw new TypeError(`${fn}(gate, options?): unknown option ${unknown.map((k) => `"${k}"`).join(', ')}; the options are { context? }`)
  if (options.context !== undefined && !isObject(options.context)) throw new TypeError(`${fn}(gate, options?): context must be an object (the gate's execute context), got ${describe(options.context)}`)
  return options
}

function describe(value) {
  if (value === null) return 'null'
  if (Array.isArray(value)) return 'an array'
  if (typeof value === 'object') return value.constructor && value.constructor !== Object ? `an instance of ${value.constructor.name}` : 'an object'
  return typeof value
}

/**
 * The adapter over one copy of the framework: `StructuredTool`, `AIMessage`, `ToolMessage`, `isAIMessage` and
 * `isBaseMessage` of @langchain/core, and LangGraph's `ToolNode` and `toolsCondition` (undefined when
 * @langchain/langgraph is not installed).
 */
function langchainAdapter({ StructuredTool, AIMessage, ToolMessage, isAIMessage, isBaseMessage, ToolNode, toolsCondition: graphToolsCondition }) {
  /** One result as LangChain's answer to a call: the text the model reads, the whole result as the artifact. */
  const toolMessage = (result) => new ToolMessage({
    content: forLlm(result),
    tool_call_id: result.callId,
    name: result.name,
    status: result.success ? 'success' : 'error',
    artifact: result,
  })

  /** The gate's context for a run: the adapter's `context` option, else the run's (LangGraph's `context`), which
   * every call of the run shares, so that they meet in one turn. */
  const contextFor = (fixed) => (config) => fixed ?? (isObject(config?.context) ? config.context : undefined)

  class GateTool extends StructuredTool {
    static lc_name() {
      return 'GateTool'
    }

    constructor(spec, run, context) {
      super()
      this.name = spec.name
      this.description = spec.description
      this.schema = spec.parameters
      // Not `#private`: LangChain's `call` runs `_call` on the view below, which has no private slots.
      this.gate = { run, context }
    }

    call(arg, config, tags) {
      // Everything of LangChain's `call` (callbacks, tracing, config), on a view of this tool whose schema (`{}`)
      // accepts any input: the gate parses, repairs and validates the call as the model sent it, and answers a bad
      // one with a result the model reads. (A fresh `{}`: LangChain's validator writes into the schema it reads.)
      return super.call.call(Object.create(this, { schema: { value: {} } }), arg, config, tags)
    }

    async _call(args, _runManager, config) {
      const toolCall = config?.toolCall
      const result = await this.gate.run({ id: toolCall?.id, name: this.name, args }, { signal: config?.signal, context: this.gate.context(config) })
      // Called with a ToolCall, LangChain answers with a ToolMessage; called with bare arguments, with the output.
      return toolCall === undefined ? forLlm(result) : toolMessage(result)
    }
  }

  const toolsOf = (gate, context, run) => gate.list(context === undefined ? undefined : { context }).map((spec) => new GateTool(spec, run, contextFor(context)))

  function langchainTools(gate, options) {
    const { context } = checked('langchainTools', gate, options)
    return toolsOf(gate, context, gatherTurns(gate))
  }

  const needsLangGraph = (fn) => {
    if (ToolNode === undefined) throw new TypeError(`${fn}: @langchain/langgraph is not installed; install it, or use langchainTools(gate) with your own tool loop`)
  }

  function toolNode(gate, options) {
    const { context } = checked('toolNode', gate, options)
    needsLangGraph('toolNode(gate)')
    return new GateToolNode(gate, context)
  }

  /** LangGraph's toolsCondition, which also sends a message whose calls are all malformed to the tools: LangGraph's
   * ends the run there, with the model's calls unanswered. */
  function toolsCondition(state) {
    needsLangGraph('toolsCondition(state)')
    const last = (Array.isArray(state) ? state : state?.messages)?.at(-1)
    return last?.invalid_tool_calls?.length > 0 ? 'tools' : graphToolsCondition(state)
  }

  /** The messages of the input a ToolNode takes, and the last AIMessage among them. */
  function messagesOf(input) {
    const messages = Array.isArray(input) ? input : input?.messages
    if (!Array.isArray(messages) || !messages.every(isBaseMessage)) {
      throw new TypeError(`toolNode: the input must be a state with messages ({ messages: BaseMessage[] }), a list of messages or a Send's { lg_tool_call }, got ${describe(input)}`)
    }
    const ai = messages.findLast((m) => isAIMessage(m))
    if (ai === undefined) throw new TypeError('toolNode: the messages hold no AIMessage, so there are no tool calls to run; route to this node only after the model asked for tools')
    return { messages, ai }
  }

  /**
   * LangChain keeps a message's calls in two lists (`tool_calls`, `invalid_tool_calls`), which loses where a
   * malformed call stood; OpenAI-style integrations keep the raw calls, in the model's order, in
   * `additional_kwargs.tool_calls`. Calls it does not list keep their relative order, after the others.
   */
  function inModelOrder(calls, raw) {
    if (!Array.isArray(raw)) return calls
    const place = new Map(raw.map((call, i) => [call?.id, i]))
    return calls.map((call, i) => [place.get(call.id) ?? raw.length + i, call]).sort((a, b) => a[0] - b[0]).map(([, call]) => call)
  }

  /**
   * The AIMessage with the malformed calls that were answered moved into `tool_calls` (arguments `{}`): the
   * integrations build the assistant's calls from `tool_calls` (@langchain/openai sends only those when there are
   * any), and a provider refuses a ToolMessage for a call the assistant message does not hold. Same id, so the
   * messages reducer puts it in the original's place.
   */
  function withCallsAnswered(ai, answeredInvalid, raw) {
    const moved = new Set(answeredInvalid.map(({ call }) => call))
    return new AIMessage({
      id: ai.id,
      name: ai.name,
      content: ai.content,
      additional_kwargs: ai.additional_kwargs,
      response_metadata: ai.response_metadata,
      usage_metadata: ai.usage_metadata,
      tool_calls: inModelOrder([...ai.tool_calls, ...answeredInvalid.map(({ call, id }) => ({ id, name: call.name ?? '', args: {}, type: 'tool_call' }))], raw),
      invalid_tool_calls: ai.invalid_tool_calls.filter((call) => !moved.has(call)),
    })
  }

  const GateToolNode = ToolNode && class GateToolNode extends ToolNode {
    #run
    #context

    constructor(gate, context) {
      const run = gatherTurns(gate)
      super(toolsOf(gate, context, run))
      // Sends of one step (createReactAgent's v2 fan-out) arrive one node run each and meet in one turn too.
      this.#run = run
      this.#context = contextFor(context)
    }

    async run(input, config) {
      const answer = async (calls) => {
        const options = { signal: config?.signal, context: this.#context(config) }
        return (await Promise.all(calls.map((call) => this.#run(call, options)))).map(toolMessage)
      }
      if (isObject(input) && 'lg_tool_call' in input) return { messages: await answer([input.lg_tool_call]) } // a Send
      const { messages, ai } = messagesOf(input)
      const answered = new Set(messages.filter((m) => m.getType() === 'tool').map((m) => m.tool_call_id))
      const pending = (calls = []) => calls.filter((call) => call.id == null || !answered.has(call.id))
      const invalid = pending(ai.invalid_tool_calls)
      const raw = ai.additional_kwargs?.tool_calls
      // Unparseable calls go to the gate too: its parse and repair may read them, and every call gets an answer.
      const calls = invalid.length === 0 ? pending(ai.tool_calls) : inModelOrder([...pending(ai.tool_calls), ...invalid], raw)
      const answers = await answer(calls)
      if (Array.isArray(input)) return answers
      if (invalid.length === 0 || ai.id == null) return { messages: answers }
      const answeredInvalid = invalid.map((call) => ({ call, id: answers[calls.indexOf(call)].tool_call_id }))
      return { messages: [withCallsAnswered(ai, answeredInvalid, raw), ...answers] }
    }
  }

  return { langchainTools, toolNode, toolsCondition }
}

module.exports = { langchainAdapter }
