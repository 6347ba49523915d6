// Types of toolgate/langchain, written once over the framework's types: langchain.d.ts fills them in with the
// CommonJS declarations of @langchain/core and @langchain/langgraph, langchain.d.mts with the ESM ones, so each
// app's tools and messages are of the copy it loads itself.
import type { ExecutionContext, ToolExecutor } from '../../index.js'

export interface LangchainAdapterOptions<Ctx extends ExecutionContext = ExecutionContext> {
  /**
   * The gate's context for every call (permissions, `sessionId`, `userId`…, and `ctx.context` in handlers).
   * Without it, each run's LangGraph context is used: `graph.invoke(input, { context })`.
   */
  context?: Ctx
}

/** toolgate/langchain over one copy of the framework: `Tool` is its StructuredTool, `Node` its ToolNode,
 * `Condition` the type of its toolsCondition. */
export interface LangchainAdapter<Tool, Node, Condition> {
  /**
   * The gate's tools as LangChain tools, for `model.bindTools(tools)`, LangGraph's `ToolNode` and
   * `createReactAgent`. LangChain's own input check is skipped so that the gate's repair and validation run.
   * Invoked with a `ToolCall`, a tool answers with a `ToolMessage` (`status: 'error'` on failure, content
   * `forLlm(result)`, the whole `ToolResult` as `artifact`); with bare arguments, with the text alone. Calls that
   * arrive in the same turn of the event loop (those of one AIMessage) run as one turn of the gate.
   * Throws a TypeError for a gate that is not a ToolExecutor or bad options.
   */
  langchainTools<Ctx extends ExecutionContext>(gate: ToolExecutor<Ctx>, options?: LangchainAdapterOptions<Ctx>): Tool[]
  /**
   * A LangGraph `ToolNode` that runs the last AIMessage's `tool_calls` and `invalid_tool_calls` (those without a
   * ToolMessage yet) as one turn of the gate, and returns `{ messages: ToolMessage[] }` (a list for a list
   * input), one per call, in the model's order; when it answered malformed calls, the AIMessage comes first, with
   * them moved into its `tool_calls` (same id: it replaces the original). `config.signal` cancels the turn. Its
   * `tools` are `langchainTools(gate, options)`, for `bindTools` and `createReactAgent`. Throws a TypeError for a
   * gate that is not a ToolExecutor, bad options, or without @langchain/langgraph installed.
   */
  toolNode<Ctx extends ExecutionContext>(gate: ToolExecutor<Ctx>, options?: LangchainAdapterOptions<Ctx>): Node
  /** LangGraph's `toolsCondition`, which also routes to `'tools'` a message whose calls are all malformed
   * (`invalid_tool_calls` only), where LangGraph's ends the run with them unanswered. */
  toolsCondition: Condition
}
