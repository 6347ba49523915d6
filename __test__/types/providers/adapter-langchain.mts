// Type tests of toolgate/langchain against the real framework packages: what the adapter returns is given to
// LangChain's and LangGraph's own types, as an app does. Nothing here runs. The `@ts-expect-error` lines must stay
// errors. The README's example is the first block.

// ── The README example ───────────────────────────────────────────────────────────────────────────────────────────
import { z } from 'zod'
import type { BaseChatModel } from '@langchain/core/language_models/chat_models'
import { StateGraph, MessagesAnnotation, START } from '@langchain/langgraph'
import { ToolExecutor } from 'toolgate'
import { toolNode, toolsCondition } from 'toolgate/langchain'

const gate = new ToolExecutor({ approve: async ({ toolName }) => toolName !== 'delete_file' })
gate.register({
  name: 'read_file',
  readOnly: true,
  parameters: z.object({ path: z.string() }),
  handler: async ({ path }) => `contents of ${path}`,
})
gate.register({ name: 'delete_file', needsApproval: true, parameters: z.object({ path: z.string() }), handler: () => 'deleted' })

export function buildAgent(model: BaseChatModel) {
  const tools = toolNode(gate)                      // a LangGraph ToolNode; tools.tools are the gate's tools
  const withTools = model.bindTools!(tools.tools)   // every chat model with tool calling has bindTools
  return new StateGraph(MessagesAnnotation)
    .addNode('agent', async (state) => ({ messages: [await withTools.invoke(state.messages)] }))
    .addNode('tools', tools)                        // all calls of one AIMessage: one turn of the gate
    .addEdge(START, 'agent')
    .addConditionalEdges('agent', toolsCondition)   // LangGraph's, and malformed calls go to the tools too
    .addEdge('tools', 'agent')
    .compile()
}
// const result = await buildAgent(model).invoke({ messages: [new HumanMessage('…')] }, { context: { userId: 'u_42' }, signal })

// ── The framework's own types ────────────────────────────────────────────────────────────────────────────────────
import { AIMessage, ToolMessage } from '@langchain/core/messages'
import type { StructuredTool, StructuredToolInterface } from '@langchain/core/tools'
import { ToolNode, createReactAgent, toolsCondition as graphToolsCondition } from '@langchain/langgraph/prebuilt'
import { langchainTools } from 'toolgate/langchain'
import type { LangchainAdapterOptions } from 'toolgate/langchain'
import type { ToolCall as GateToolCall, ToolResult } from 'toolgate'

export async function frameworkTypes(model: BaseChatModel, ai: AIMessage): Promise<void> {
  const tools: StructuredTool[] = langchainTools(gate)
  const asInterface: StructuredToolInterface[] = tools
  model.bindTools!(asInterface)
  const theirs: ToolNode = new ToolNode(tools)      // the gate's tools in LangGraph's own ToolNode
  const ours: ToolNode = toolNode(gate, { context: { userId: 'u_42', deniedTools: ['delete_file'] } })
  createReactAgent({ llm: model, tools: ours })
  createReactAgent({ llm: model, tools: langchainTools(gate) })
  void theirs
  const condition: typeof graphToolsCondition = toolsCondition
  void condition

  // A tool invoked with a ToolCall answers with a ToolMessage, its artifact the ToolResult.
  const answer: ToolMessage = await tools[0]!.invoke({ id: 'call_1', name: 'read_file', args: { path: 'a' }, type: 'tool_call' })
  const result: ToolResult = answer.artifact
  const status: 'success' | 'error' | undefined = answer.status
  void result, status

  // LangChain's ToolCall is one of the shapes gate.execute takes.
  const calls: GateToolCall[] = ai.tool_calls ?? []
  void calls
}

// ── Misuse the types refuse ──────────────────────────────────────────────────────────────────────────────────────
export function refused(): void {
  // @ts-expect-error the gate must be a ToolExecutor
  langchainTools({ execute: async () => [] })
  // @ts-expect-error the context is an object
  toolNode(gate, { context: 'u_42' })
  // @ts-expect-error there is no such option
  langchainTools(gate, { contxt: {} })
  // @ts-expect-error a context field toolgate reads has its type
  const options: LangchainAdapterOptions = { context: { allowedTools: 'read_file' } }
  void options
  // @ts-expect-error a toolNode is not a tool: it goes in addNode, its .tools in bindTools
  const notTools: StructuredTool[] = toolNode(gate)
  void notTools
}

// ── The CommonJS declarations: over @langchain/core's CommonJS types, apart from the ESM ones ────────────────────
type CjsAdapter = typeof import('toolgate/langchain', { with: { 'resolution-mode': 'require' } })
type CjsToolNode = import('@langchain/langgraph/prebuilt', { with: { 'resolution-mode': 'require' } }).ToolNode
type CjsStructuredTool = import('@langchain/core/tools', { with: { 'resolution-mode': 'require' } }).StructuredTool

export function commonJs(cjs: CjsAdapter): void {
  const node: CjsToolNode = cjs.toolNode(gate)
  const tools: CjsStructuredTool[] = cjs.langchainTools(gate)
  void node, tools
  // @ts-expect-error an ESM app's ToolNode is another class than the CommonJS one
  const esm: ToolNode = cjs.toolNode(gate)
  void esm
}
