'use strict'
// toolgate for the AI SDK (`ai` 5, 6 and 7): tools for generateText/streamText whose calls all go through the gate,
// one turn per step; a repair hook that hands the calls the SDK cannot parse or look up to the gate's repair and
// lookup; and, for an app that runs the calls itself, the step's messages with one result per call id. Everything
// here is a plain object of the shapes the SDK documents, and nothing is imported from `ai`: an app keeps its one
// copy of the SDK, whichever module format it loads it in.

const { ToolExecutor, formatResults, forLlm } = require('../../index.js')
const { gatherTurns } = require('./turns.js')

const AI_SDK_VERSIONS = [5, 6, 7]

/** The brands the SDK's `asSchema` looks for: global symbols, so every copy of every major knows them. */
const SCHEMA_BRAND = Symbol.for('vercel.ai.schema')
const VALIDATOR_BRAND = Symbol.for('vercel.ai.validator')

/**
 * What `jsonSchema(schema)` of each major returns, less its type-only `_type` (provider-utils `jsonSchema`; ai 5
 * also reads the validator brand). `validate` is there and undefined, which the SDK reads as nothing to check: it
 * hands the parsed input on as it is, and the gate's repair and validation decide.
 */
function plainJsonSchema(schema) {
  return { [SCHEMA_BRAND]: true, [VALIDATOR_BRAND]: true, jsonSchema: schema, validate: undefined }
}

/** The tools this module made: the repair hook leaves calls of any other tool to the SDK. */
const gateTools = new WeakSet()

/** A pre-aborted signal: a turn under it reads, repairs and looks up its calls and runs none of them. */
const LOOKUP_ONLY = AbortSignal.abort()

/** How many approval requests a tool set remembers; past it the oldest go (those calls, should they run, are asked
 * about by the gate again: forgetting fails closed). */
const MAX_PENDING_APPROVALS = 10_000

/**
 * What `execute` throws for a failed call. The SDK records it as the call's tool-error, and the model reads its
 * message: the result's text (`Error (kind): …`, as `forLlm` gives it). `result` is the whole ToolResult.
 */
class ToolResultError extends Error {
  constructor(result) {
    super(forLlm(result))
    this.name = 'ToolResultError'
    this.result = result
  }

  /** ai 7 writes an error as `error.toString()`, which would put the class name before the text. */
  toString() {
    return this.message
  }
}

/**
 * The gate's tools as an AI SDK `ToolSet`. Every `execute` hands its call to the gate, and the calls of one step
 * (the SDK starts them together) run as one turn: read-only calls together, the others alone and in order, dedup,
 * rate limits and approvals over the step as the model sent it. A call's `output` is its ToolResult; the model
 * reads its text, or its text and images. A failed call throws a ToolResultError, which the SDK records as the
 * call's tool-error with that text. Tools with `needsApproval` ask through the SDK's approval flow (6 and 7).
 */
function aiSdkTools(gate, options) {
  const usage = 'aiSdkTools(gate, options?)'
  checkGate(gate, usage)
  const { context, version, jsonSchema = plainJsonSchema } = readOptions(options, usage, ['context', 'version', 'jsonSchema'])
  const run = gatherTurns(gate)
  const askedNames = gate.list({ context }).filter((t) => t.needsApproval).map((t) => t.name)
  const approvals = sdkApprovals(askedNames)
  // No prototype: a call named `toString` or `constructor` is an unknown name the gate answers, not an inherited
  // member the SDK would take for a tool.
  const tools = Object.create(null)
  for (const def of gate.definitions('ai-sdk', { context })) {
    const tool = {
      description: def.description,
      inputSchema: jsonSchema(def.inputSchema),
      // ai 5 and 6 pass the call's context as `experimental_context`, 7 as `context` (its `toolsContext[name]`).
      // `messages`: the same array for every call of a step, another for each run, so two runs never share a turn.
      execute: async (input, { toolCallId, abortSignal, messages, experimental_context, context: toolContext }) => {
        const callContext = experimental_context ?? toolContext ?? context
        const result = await run(
          { id: toolCallId, name: def.name, input },
          { signal: abortSignal, run: messages, context: approvals.approvedBySdk(toolCallId) ? approvals.contextFor(callContext) : callContext },
        )
        if (!result.success) throw new ToolResultError(result)
        return result
      },
      // ai 5 passes the output itself, 6 and 7 `{ toolCallId, input, output }`.
      toModelOutput: (arg) => formatResults([isToolResult(arg) ? arg : arg.output], 'ai-sdk', { version }).content[0].output,
    }
    if (askedNames.includes(def.name)) tool.needsApproval = (_input, { toolCallId }) => approvals.ask(toolCallId)
    gateTools.add(tool)
    tools[def.name] = tool
  }
  return tools
}

/**
 * The approvals the SDK asks its user for. ai 6 consults a tool's `needsApproval` when the call comes and again
 * just before it runs an approved call; ai 7 does the same through `toolApproval`, whose fallback is the tool's
 * `needsApproval`. Either way the SDK runs such a call only once its user approved it, so a call whose approval was
 * asked here and which then runs needs no second ask from the gate: its turn's context lists its tool in
 * `approvedTools`. ai 5 has no approval flow and never asks, so there the gate's `approve` decides.
 */
function sdkApprovals(names) {
  const asked = new Set()
  /** By base context: the approved context made from it, and the base's fields it was made from. */
  const approvedContexts = new WeakMap()
  let approvedWithoutContext
  return {
    ask(toolCallId) {
      asked.delete(toolCallId)
      asked.add(toolCallId)
      if (asked.size > MAX_PENDING_APPROVALS) asked.delete(asked.values().next().value)
      return true
    },
    /** Whether the SDK asked about this call, which runs now: then its user approved it. */
    approvedBySdk: (toolCallId) => asked.delete(toolCallId),
    /** One context object per base context as it stands: approved calls of one step stay in one turn, and a call
     * after the app changed the base context (a rule it added) reads it afresh. */
    contextFor(base) {
      if (base === undefined) return (approvedWithoutContext ??= { approvedTools: names })
      // Not a context the gate takes: passed on as it is, for the gate to refuse as it would any other call's.
      if (base === null || typeof base !== 'object' || (base.approvedTools !== undefined && !Array.isArray(base.approvedTools))) return base
      const kept = approvedContexts.get(base)
      if (kept !== undefined && sameFields(kept.fields, base)) return kept.context
      const context = { ...base, approvedTools: [...(base.approvedTools ?? []), ...names] }
      approvedContexts.set(base, { fields: { ...base }, context })
      return context
    },
  }
}

/** Whether two objects have the same own fields, holding the same values. */
function sameFields(a, b) {
  const keys = Object.keys(a)
  return keys.length === Object.keys(b).length && keys.every((key) => Object.hasOwn(b, key) && Object.is(a[key], b[key]))
}

/**
 * The function for `experimental_repairToolCall` (ai 5 and 6) or `repairToolCall` (ai 7). The SDK calls it for a
 * call it cannot parse or look up, before any tool runs:
 * - a call to one of the gate's tools whose input is not JSON goes on with its text as the input, so the gate's
 *   JSON repair reads it when the call runs in its step's turn;
 * - a name the SDK does not know is looked up by the gate (running nothing): an unknown name throws its
 *   `unknown_tool` result, which the SDK records as the call's tool-error; a name the gate's `repair.toolNames`
 *   corrects goes on under the corrected name.
 * Calls of other tools are left to the SDK.
 */
function aiSdkRepairToolCall(gate, options) {
  const usage = 'aiSdkRepairToolCall(gate, options?)'
  checkGate(gate, usage)
  const { context } = readOptions(options, usage, ['context'])
  gate.list({ context }) // a context the gate would refuse throws its TypeError now, not on the first call
  return async ({ toolCall, tools, error }) => {
    // The model's text as a JSON string: the SDK parses that back to the text, which the gate parses and repairs.
    const asText = (toolName) => ({ ...toolCall, toolName, input: JSON.stringify(toolCall.input) })
    if (error?.name !== 'AI_NoSuchToolError') return gateTools.has(ownTool(tools, toolCall.toolName)) ? asText(toolCall.toolName) : null
    const [lookup] = await gate.execute([{ id: toolCall.toolCallId, name: toolCall.toolName, input: toolCall.input }], { signal: LOOKUP_ONLY, context })
    // Anything but `cancelled` is the gate's final answer; `cancelled` means the call would have run.
    if (lookup.errorKind !== 'cancelled') throw new ToolResultError(lookup)
    return gateTools.has(ownTool(tools, lookup.name)) ? asText(lookup.name) : null
  }
}

/**
 * For an app that runs the step's calls itself (`generateText` with tools that have no `execute`, then
 * `gate.execute(toolCalls)`): the step's `response.messages` with the gate's results, one per call id. The SDK has
 * already answered the calls it could not parse or look up; those answers go, and the gate's take their place, in
 * one tool message at the end.
 */
function aiSdkResponseMessages(responseMessages, results, options) {
  const usage = 'aiSdkResponseMessages(responseMessages, results, options?)'
  if (!Array.isArray(responseMessages)) throw new TypeError(`${usage}: responseMessages must be an array (the step's response.messages)`)
  const { version } = readOptions(options, usage, ['version'])
  const toolMessage = formatResults(results, 'ai-sdk', { version })
  const answered = new Set(results.map((r) => r.callId))
  const messages = []
  for (const message of responseMessages) {
    if (message?.role !== 'tool' || !Array.isArray(message.content)) {
      messages.push(message)
      continue
    }
    const content = message.content.filter((part) => part?.type !== 'tool-result' || !answered.has(part.toolCallId))
    if (content.length === message.content.length) messages.push(message)
    else if (content.length > 0) messages.push({ ...message, content })
  }
  if (results.length > 0) messages.push(toolMessage)
  return messages
}

function isToolResult(value) {
  return value !== null && typeof value === 'object' && typeof value.callId === 'string' && typeof value.success === 'boolean'
}

/** A tool of the SDK's tool set by its own key only (a name such as `__proto__` finds nothing). */
function ownTool(tools, name) {
  return tools != null && Object.hasOwn(tools, name) ? tools[name] : undefined
}

function checkGate(gate, usage) {
  if (!(gate instanceof ToolExecutor)) {
    throw new TypeError(`${usage}: gate must be a ToolExecutor (new ToolExecutor() from 'toolgate'); got ${gate === null ? 'null' : typeof gate}`)
  }
}

/** The options object, checked: unknown keys, a context that is no object, a version that is no AI SDK major. */
function readOptions(options, usage, known) {
  if (options === undefined) return {}
  if (options === null || typeof options !== 'object') throw new TypeError(`${usage}: options must be an object ({ ${known.join(', ')} })`)
  for (const key of Object.keys(options)) {
    if (!known.includes(key)) throw new TypeError(`${usage}: unknown option "${key}" (known: ${known.join(', ')})`)
  }
  const { context, version, jsonSchema } = options
  if (context !== undefined && (context === null || typeof context !== 'object')) {
    throw new TypeError(`${usage}: context must be an object (the gate's execution context)`)
  }
  if (version !== undefined && !AI_SDK_VERSIONS.includes(version)) {
    throw new TypeError(`${usage}: version must be the AI SDK major, one of ${AI_SDK_VERSIONS.join(', ')}; got ${typeof version === 'string' ? `"${version}"` : String(version)}`)
  }
  if (jsonSchema !== undefined && typeof jsonSchema !== 'function') {
    throw new TypeError(`${usage}: jsonSchema must be the jsonSchema function of the \`ai\` you call`)
  }
  return options
}

module.exports = { aiSdkTools, aiSdkRepairToolCall, aiSdkResponseMessages, ToolResultError }
