'use strict'
// The Vercel AI SDK (ai@5) running tool calls itself, as an app built on it does: one generateText step whose mock
// model (MockLanguageModelV2 from 'ai/test') answers with every call as a tool-call part (finishReason 'tool-calls').
// The SDK looks each tool up, parses the input JSON, validates it with the tool's zod schema, runs `execute` for the
// valid ones (all at once, Promise.all) and reports each call as a tool-result or tool-error part. No network. The
// per-call figure includes generateText's own step bookkeeping (prompt standardization, tool schema conversion,
// response messages), which is what driving tools through the SDK costs.
//
// What the AI SDK does not do, next to toolgate (ai@5.0.x):
// - no time limit: a handler that never settles holds generateText forever (only the caller's abortSignal is passed on);
// - no redaction of secrets in outputs or errors;
// - no result cache, no single flight, no session dedup of repeated queries;
// - no rate limits;
// - no retries of a failing tool (maxRetries retries the model call only);
// - no scheduling: all valid calls of a step start at once, no concurrency cap, no read-only vs state-changing order;
// - no output limit: a 30 KB or 10 MB output reaches the model whole, no artifact file, no preview;
// - no normalization: the return value is kept as is (serialized only when sent to the model), no binary handling;
// - no permission station (context allow/deny lists, rules, approvals) and no fencing of untrusted output;
// - no validation at all for a tool given a plain JSON Schema (jsonSchema() has no validator): only a zod (or
//   Standard Schema) inputSchema is checked, so the benchmark registers zod schemas;
// - no argument repair (experimental_repairToolCall is a hook the app writes, usually another model call);
// - no per-call trace: no stages, attempts, latency or queue time on results, no error kinds beyond the error's class.

const { generateText, tool, jsonSchema, stepCountIs } = require('ai')
const { MockLanguageModelV2 } = require('ai/test')

const USAGE = { inputTokens: 0, outputTokens: 0, totalTokens: 0 }

/** Any provider's call shape → the LanguageModelV2 tool-call part a provider adapter would produce. */
function toToolCallPart(call, i) {
  const fn = call.function
  const raw = fn ? fn.arguments : call.arguments ?? call.input ?? call.args
  return {
    type: 'tool-call',
    toolCallId: String(call.call_id ?? call.toolCallId ?? call.id ?? `call_${i}`),
    toolName: String(fn ? fn.name : call.name ?? call.toolName),
    input: typeof raw === 'string' ? raw : JSON.stringify(raw ?? {}),
  }
}

function errorText(error) {
  if (typeof error === 'string') return error
  if (error instanceof Error) return error.message
  try { return JSON.stringify(error) } catch { return String(error) }
}

function createAiSdk() {
  const tools = {}

  function register({ name, description, parameters, zodSchema, handler }) {
    tools[name] = tool({
      description,
      inputSchema: zodSchema ?? jsonSchema(parameters ?? { type: 'object', properties: {} }),
      // The SDK hands execute (input, { toolCallId, messages, abortSignal, experimental_context }).
      execute: (input, options) => handler(input, {
        callId: options.toolCallId, toolName: name, attempt: 1, context: options.experimental_context, signal: options.abortSignal,
      }),
    })
    return api
  }

  async function execute(calls, { signal, context } = {}) {
    const parts = calls.map(toToolCallPart)
    // A fresh mock per turn: MockLanguageModelV2 records every doGenerate call, which would grow without bound.
    const model = new MockLanguageModelV2({
      doGenerate: async () => ({ content: parts, finishReason: 'tool-calls', usage: USAGE, warnings: [] }),
    })
    const result = await generateText({
      model, tools, prompt: 'Use the tools.', stopWhen: stepCountIs(1), maxRetries: 0, abortSignal: signal, experimental_context: context,
    })
    // The step's content holds a tool-result or a tool-error part per call: handler throws, unknown tools and
    // invalid input (bad JSON, schema mismatch) all come back as tool-error parts, not as exceptions.
    const byId = new Map()
    for (const part of result.steps[0].content) {
      if (part.type === 'tool-result' || part.type === 'tool-error') byId.set(part.toolCallId, part)
    }
    return parts.map((p) => {
      const part = byId.get(p.toolCallId)
      if (part === undefined) return { callId: p.toolCallId, name: p.toolName, success: false, output: 'no result' }
      const success = part.type === 'tool-result'
      return { callId: p.toolCallId, name: p.toolName, success, output: success ? part.output : errorText(part.error) }
    })
  }

  const api = { register, execute }
  return api
}

module.exports = { createAiSdk }
