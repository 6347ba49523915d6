'use strict'
// toolgate for the OpenAI Agents SDK (@openai/agents): function tools for an Agent whose calls all go through the
// gate, one turn per model response; a wrapper of the run's model that lets calls the Runner cannot parse reach the
// gate's repair; the Runner options under which the gate answers names it does not know and words the refusal of a
// call its user rejected; and the executor's `approve`, which hears the decisions its user made on a run's
// interruptions. Everything here is a plain object of the shapes the SDK documents, and nothing is imported from
// the SDK: an app keeps its one copy of it, whichever module format it loads it in.

const { ToolExecutor, forLlm } = require('../../index.js')
const { gatherTurns, perStep } = require('./turns.js')

/**
 * The Runner parses a call's arguments before any hook of a tool sees them (runner/toolExecution.js,
 * `parseToolArguments`), and turns a call it cannot parse into an approval request or its own error text. The model
 * wrapper therefore hands such a call on as this JSON object holding the model's text, which the tool unwraps for
 * the gate to parse and repair, and puts the model's text back into the history the model reads next.
 */
const ENVELOPE = '__toolgate_unparsed_arguments'
const ENVELOPE_START = `{"${ENVELOPE}":`

/** A pre-aborted signal: a turn under it looks up, reads and checks its calls, and runs none of them. */
const LOOKUP_ONLY = AbortSignal.abort()

/** Why a call the SDK's user rejected was not approved, in the gate's refusal. */
const REJECTED = 'the user rejected it'
/** Why an ask no run's user was asked about was not approved (no fallback callback). */
const NOT_ASKED = 'an Agents SDK run puts to its user only the calls of tools registered with needsApproval, and '
  + 'there is no other approval callback'

/** How many interrupted calls a gate remembers for their replay; past it the oldest go (a rejection of one of those
 * is then worded by the SDK). */
const MAX_INTERRUPTED = 10_000

/** Per gate: one gathering of calls into turns (every tool of the gate joins it), what a context may use, and the
 * calls its tools interrupted a run for, by call id (a RunState written out and read back keeps them). */
const perGate = new WeakMap()

/**
 * The runs whose user decided a call the gate is about to ask about: by the turn's context object and the call's
 * id, the call's RunContext, where `openAiAgentsApproval` reads the decision. Held only while the call is in the
 * gate.
 */
const decidedIn = new WeakMap()

/**
 * The gate's tools as FunctionTools for an Agent's `tools`. Every call goes to the gate, and the calls of one model
 * response (the Runner invokes them together) run as one turn: read-only calls together, the others alone and in
 * order. The model reads the result's text (`forLlm`), with its images when it has some. The run's context (the
 * RunContext's `context`, or `options.context`) is the gate's context, so its lists and permissions decide what the
 * run may use and what it is offered. Calls of tools registered with `needsApproval` interrupt the run.
 */
function openAiAgentsTools(gate, options) {
  const usage = 'openAiAgentsTools(gate, options?)'
  const { run, visible, interrupted } = gateParts(gate, usage)
  const contextOf = contextResolver(options, usage)
  const asking = new Set(gate.list().filter((t) => t.needsApproval).map((t) => t.name))
  return gate.definitions('openai-responses').map(({ name, description, parameters }) => {
    const asks = asking.has(name)
    return {
      type: 'function',
      name,
      description,
      parameters,
      // The gate validates: strict mode would also make every optional parameter required.
      strict: false,
      isEnabled: async (runContext) => visible(contextOf(runContext)).has(name),
      // The Runner asks this before it invokes a call and interrupts the run when it answers true; a call it then
      // invokes was approved by the run's user (or was never asked about).
      needsApproval: async (runContext, input, callId) => {
        if (asks) remember(interrupted, callId, { name, arguments: modelArguments(input) })
        return asks
      },
      invoke: async (runContext, input, details) => {
        const callId = details?.toolCall?.callId
        const context = contextOf(runContext)
        // The RunContext is the run's own: two runs never share a turn, even under one context or none.
        const turn = () => run({ id: callId, name, arguments: modelArguments(input) }, { signal: details?.signal, context, run: runContext })
        if (!asks) return toolOutput(await turn())
        interrupted.delete(callId)
        return toolOutput(await hearingDecision(context, callId, runContext, turn))
      },
    }
  })
}

/**
 * The options of a Runner (or of one `run`) under which the gate answers what the SDK would answer itself:
 * - a name the agent has no tool for: the gate looks it up (running nothing) and its `unknown_tool` result (the
 *   tools this context may use, a "did you mean") is what the model reads;
 * - a call the run's user rejected: it goes through the gate again, asked about and refused there, so the model
 *   reads the gate's `approval_denied` wording (needs `openAiAgentsApproval` as the executor's `approve`).
 */
function openAiAgentsRunConfig(gate, options) {
  const usage = 'openAiAgentsRunConfig(gate, options?)'
  const { interrupted } = gateParts(gate, usage)
  const contextOf = contextResolver(options, usage)
  return {
    toolNotFoundBehavior: 'return_error_to_model',
    toolErrorFormatter: async ({ kind, toolType, toolName, callId, runContext, defaultMessage }) => {
      if (toolType !== 'function') return undefined
      // The SDK's not-found text for a name no tool has (runner/turnResolution.js); another one is about a
      // deferred tool not loaded yet, which only its own answer (load it with tool_search) helps with.
      if (kind === 'tool_not_found' && defaultMessage === `Tool '${toolName}' not found.`) {
        const [lookup] = await gate.execute([{ id: callId, name: toolName }], { signal: LOOKUP_ONLY, context: contextOf(runContext) })
        // `cancelled`: the gate knows the name (it is not one of this agent's tools, or the gate's name repair
        // would correct it): the SDK's own answer stands.
        return lookup.errorKind === 'cancelled' ? undefined : forLlm(lookup)
      }
      const call = kind === 'approval_rejected' ? interrupted.get(callId) : undefined
      // A call this process did not see interrupted (a RunState resumed in another process, a sticky rejection):
      // the SDK's text stands.
      if (call === undefined || call.name !== toolName) return undefined
      interrupted.delete(callId)
      // Under a deny rule of its own, which the gate applies before anything else, whatever its approve callback:
      // the call cannot run, and the model reads the gate's refusal with the user's decision as its reason.
      const [result] = await gate.execute([{ id: callId, ...call }], { context: rejectedIn(contextOf(runContext), call.name) })
      return forLlm(result)
    },
  }
}

/**
 * The executor's `approve` for gates whose tools an Agents SDK run calls: an ask about a call the run's user
 * decided (approved, or rejected on its interruption) is answered with that decision, without asking anyone again;
 * any other ask (those of `ask` rules and modes, which do not interrupt a run, and asks outside any run) goes to
 * `fallback`, or is denied.
 */
function openAiAgentsApproval(fallback) {
  if (fallback !== undefined && typeof fallback !== 'function') {
    throw new TypeError('openAiAgentsApproval(fallback?): fallback must be an approve callback (request) => answer')
  }
  return (request) => {
    const runContext = decidedIn.get(request.context)?.get(request.callId)
    const decision = runContext?.isToolApproved({ toolName: request.toolName, callId: request.callId })
    if (decision === true) return 'approve'
    if (decision === false) return { decision: 'deny', reason: REJECTED }
    return fallback === undefined ? { decision: 'deny', reason: NOT_ASKED } : fallback(request)
  }
}

/**
 * The run's model, for an Agent's `model` or a Runner's `model`: a call to one of the gate's tools whose arguments
 * are not a JSON object reaches the gate as the model wrote it, where the SDK would have refused it before any tool
 * saw it (or asked for its approval). The model is asked with its own text back in the history.
 */
function openAiAgentsModel(gate, model) {
  const usage = 'openAiAgentsModel(gate, model)'
  gateParts(gate, usage)
  if (model === null || typeof model !== 'object' || typeof model.getResponse !== 'function' || typeof model.getStreamedResponse !== 'function') {
    throw new TypeError(`${usage}: model must be an Agents SDK Model (getResponse and getStreamedResponse); for a model name, wrap the provider with openAiAgentsModelProvider`)
  }
  const wrapped = {
    getResponse: async (request) => enveloped(gate, await model.getResponse(unenveloped(request)), request),
    async* getStreamedResponse(request) {
      for await (const event of model.getStreamedResponse(unenveloped(request))) {
        yield event?.type === 'response_done' ? { ...event, response: enveloped(gate, event.response, request) } : event
      }
    },
  }
  if (model.supportsPromptModelSelection !== undefined) wrapped.supportsPromptModelSelection = model.supportsPromptModelSelection
  if (typeof model.getRetryAdvice === 'function') wrapped.getRetryAdvice = (args) => model.getRetryAdvice({ ...args, request: unenveloped(args.request) })
  return wrapped
}

/** A ModelProvider (a Runner's `modelProvider`) whose models are wrapped as `openAiAgentsModel` wraps one. */
function openAiAgentsModelProvider(gate, provider) {
  const usage = 'openAiAgentsModelProvider(gate, provider)'
  gateParts(gate, usage)
  if (provider === null || typeof provider !== 'object' || typeof provider.getModel !== 'function') {
    throw new TypeError(`${usage}: provider must be an Agents SDK ModelProvider (getModel), such as new OpenAIProvider()`)
  }
  return { getModel: async (modelName) => openAiAgentsModel(gate, await provider.getModel(modelName)) }
}

/** The response with the arguments of the gate's calls that are not a JSON object inside an envelope. */
function enveloped(gate, response, request) {
  const unreadable = (item) => item?.type === 'function_call' && !isObjectJson(item.arguments)
  if (!Array.isArray(response?.output) || !response.output.some(unreadable)) return response
  const offered = new Set((request?.tools ?? []).filter((t) => t?.type === 'function').map((t) => t.name))
  const registered = new Set(gate.list().map((t) => t.name))
  const output = response.output.map((item) => (unreadable(item) && offered.has(item.name) && registered.has(item.name)
    ? { ...item, arguments: JSON.stringify({ [ENVELOPE]: typeof item.arguments === 'string' ? item.arguments : '' }) }
    : item))
  return { ...response, output }
}

/** The request with the model's own arguments back in the calls of its history. */
function unenveloped(request) {
  const input = request?.input
  if (!Array.isArray(input) || !input.some(isEnvelopedCall)) return request
  return { ...request, input: input.map((item) => (isEnvelopedCall(item) ? { ...item, arguments: modelArguments(item.arguments) } : item)) }
}

const isEnvelopedCall = (item) => item?.type === 'function_call' && modelArguments(item.arguments) !== item.arguments

/** The model's own arguments: the text in an envelope (as JSON text, or as the SDK parsed it), else the input. */
function modelArguments(input) {
  let value = input
  if (typeof input === 'string') {
    if (!input.startsWith(ENVELOPE_START)) return input
    try {
      value = JSON.parse(input)
    } catch {
      return input
    }
  }
  const isEnvelope = value !== null && typeof value === 'object' && typeof value[ENVELOPE] === 'string' && Object.keys(value).length === 1
  return isEnvelope ? value[ENVELOPE] : input
}

/** Whether the SDK's parse of these arguments gives what a tool takes: a JSON object. */
function isObjectJson(text) {
  if (typeof text !== 'string') return false
  try {
    const value = JSON.parse(text)
    return value !== null && typeof value === 'object' && !Array.isArray(value)
  } catch {
    return false
  }
}

/** What the model reads of a result: its text, and its images after it when it has some. */
function toolOutput(result) {
  const text = forLlm(result)
  const images = result.metadata.images
  if (images === undefined || images.length === 0) return text
  return [{ type: 'text', text }, ...images.map(({ data, mediaType }) => ({ type: 'image', image: { data, mediaType } }))]
}

/** Runs `work` (the call's turn in the gate) while the gate's ask about the call can read its run's decision. */
async function hearingDecision(context, callId, runContext, work) {
  if (context === null || typeof context !== 'object') return work()
  let calls = decidedIn.get(context)
  if (calls === undefined) decidedIn.set(context, (calls = new Map()))
  calls.set(callId, runContext)
  try {
    return await work()
  } finally {
    calls.delete(callId)
  }
}

/** Remembers an interrupted call, the oldest going first past MAX_INTERRUPTED. */
function remember(interrupted, callId, call) {
  interrupted.delete(callId)
  interrupted.set(callId, call)
  if (interrupted.size > MAX_INTERRUPTED) interrupted.delete(interrupted.keys().next().value)
}

/** `base` with a deny rule for the tool the run's user rejected a call of. */
function rejectedIn(base, name) {
  const { permissions, ...rest } = base ?? {}
  const deny = Array.isArray(permissions?.deny) ? permissions.deny : []
  return { ...rest, permissions: { ...permissions, deny: [...deny, { tool: name, reason: 'the user rejected this call when asked to approve it' }] } }
}

/** The gate's shared parts, after checking it is a gate. */
function gateParts(gate, usage) {
  if (!(gate instanceof ToolExecutor)) {
    throw new TypeError(`${usage}: gate must be a ToolExecutor (new ToolExecutor() from 'toolgate'); got ${gate === null ? 'null' : typeof gate}`)
  }
  let parts = perGate.get(gate)
  if (parts === undefined) perGate.set(gate, (parts = { run: gatherTurns(gate), visible: visibleNames(gate), interrupted: new Map() }))
  return parts
}

/**
 * The names a context may use. The Runner asks each tool in turn before every model call; the gate's list is read
 * once per turn of the event loop for each context, so a context changed between model calls is read afresh.
 */
function visibleNames(gate) {
  const cached = perStep()
  // The gate itself keys "no context"; a context that is no object fails in `list`, as it would in `execute`.
  return (context) => cached(context === undefined ? gate : context, () => new Set(gate.list({ context }).map((t) => t.name)))
}

/**
 * `options.context` as a function of the RunContext: the run's own context by default, the object given, or what
 * the function given returns for the run (once per run, so that the calls of one response share one turn).
 */
function contextResolver(options, usage) {
  if (options !== undefined && (options === null || typeof options !== 'object')) throw new TypeError(`${usage}: options must be an object ({ context })`)
  for (const key of Object.keys(options ?? {})) {
    if (key !== 'context') throw new TypeError(`${usage}: unknown option "${key}" (known: context)`)
  }
  const context = options?.context
  if (context === undefined) return (runContext) => runContext?.context
  if (typeof context === 'function') {
    const perRun = new WeakMap()
    return (runContext) => {
      if (runContext === null || typeof runContext !== 'object') return context(runContext)
      if (!perRun.has(runContext)) perRun.set(runContext, context(runContext))
      return perRun.get(runContext)
    }
  }
  if (context === null || typeof context !== 'object') {
    throw new TypeError(`${usage}: context must be the gate's execution context (an object) or a function of the run's RunContext`)
  }
  return () => context
}

module.exports = { openAiAgentsTools, openAiAgentsRunConfig, openAiAgentsApproval, openAiAgentsModel, openAiAgentsModelProvider }
