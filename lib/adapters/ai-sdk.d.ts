// Types of toolgate/ai-sdk. Without `jsonSchema`, the tools are typed with the `Tool` of the `ai` package the app
// has (the adapter is for it: `ai` is its peer dependency); with the `jsonSchema` helper of the `ai` you call, they
// are typed from it, for an app that names its major under another name.
import type { Tool } from 'ai'
import type {
  AISDKFormatOptions,
  AISDKToolMessage,
  AISDKToolResultPart,
  AISDKVersion,
  ExecutionContext,
  ObjectJsonSchema,
  ToolExecutor,
  ToolResult,
} from '../../index.js'

export interface AISDKToolsOptions<Ctx = ExecutionContext, V extends AISDKVersion = AISDKVersion> {
  /** Only the tools this context may use, and the gate's context of a call the SDK passes none for. */
  context?: Ctx
  /** The AI SDK major, for the image parts of results that carry images (default 7). */
  version?: V
}

/** What the SDK passes `execute` (ai 5 and 6 the context as `experimental_context`, 7 as `context`). */
export interface AISDKToolExecutionOptions {
  toolCallId: string
  abortSignal?: AbortSignal
  experimental_context?: unknown
  context?: unknown
}

/** One of the gate's tools, typed without the `ai` package: its `inputSchema` is what `jsonSchema` returned. */
export interface AISDKTool<S, V extends AISDKVersion = 7> {
  description: string
  inputSchema: S
  /** Resolves to the call's ToolResult; rejects with a ToolResultError when the call failed. */
  execute(input: unknown, options: AISDKToolExecutionOptions): Promise<ToolResult>
  /** ai 5 passes the output, 6 and 7 `{ toolCallId, input, output }`. */
  toModelOutput(options: ToolResult | { toolCallId: string; input: unknown; output: ToolResult }): AISDKToolResultPart<V>['output']
  /** Set on tools registered with `needsApproval` (ai 6; ai 7's fallback when `toolApproval` names no status for it). */
  needsApproval?: (input: unknown, options: { toolCallId: string }) => boolean
}

/**
 * The gate's tools (those `context` may use) as a `ToolSet` for `generateText`/`streamText`. The calls of one step
 * run as one turn of the gate; a call's `output` is its ToolResult, and a failed call is the SDK's tool-error whose
 * text is the result's. Throws a TypeError for a gate that is no ToolExecutor or bad options.
 */
export declare function aiSdkTools<Ctx extends ExecutionContext>(
  gate: ToolExecutor<Ctx>,
  options?: AISDKToolsOptions<Ctx>,
): Record<string, Tool<unknown, ToolResult>>
export declare function aiSdkTools<S, Ctx extends ExecutionContext, V extends AISDKVersion = 7>(
  gate: ToolExecutor<Ctx>,
  options: AISDKToolsOptions<Ctx, V> & { jsonSchema: (schema: ObjectJsonSchema) => S },
): Record<string, AISDKTool<S, V>>

/** The part of a tool call the repair hook reads (LanguageModelV2/V3/V4ToolCall: `input` is the JSON text). */
export interface AISDKRawToolCall {
  toolCallId: string
  toolName: string
  input: string
}

/**
 * The function for `experimental_repairToolCall` (ai 5, 6) or `repairToolCall` (ai 7): input that is not JSON
 * reaches the gate's repair, and a name the SDK does not know its lookup (an unknown one becomes the call's
 * tool-error with the gate's `unknown_tool` text).
 */
export declare function aiSdkRepairToolCall<Ctx extends ExecutionContext>(
  gate: ToolExecutor<Ctx>,
  options?: { context?: Ctx },
): <T extends AISDKRawToolCall>(options: { toolCall: T; tools?: object; error: Error }) => Promise<T | null>

/**
 * The step's `response.messages` with `results` (of `gate.execute(toolCalls)`) as one tool message at the end, and
 * without the SDK's own results for those call ids: one result per call id. `version` as for `formatResults`.
 */
export declare function aiSdkResponseMessages<M extends { role: string }, V extends AISDKVersion = 7>(
  responseMessages: readonly M[],
  results: readonly ToolResult[],
  options?: AISDKFormatOptions<V>,
): (M | AISDKToolMessage<V>)[]

/** What a tool's `execute` throws for a failed call: its message is the text the model reads, `forLlm(result)`. */
export declare class ToolResultError extends Error {
  constructor(result: ToolResult)
  readonly result: ToolResult
}
