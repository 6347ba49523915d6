// toolgate/langchain for ESM: the shared adapter over the ESM build of @langchain/core (and of
// @langchain/langgraph, when installed), the copy an ESM app imports itself.
import { StructuredTool } from '@langchain/core/tools'
import { AIMessage, ToolMessage, isAIMessage, isBaseMessage } from '@langchain/core/messages'
import shared from './langchain.shared.js'

/** LangGraph's ToolNode and toolsCondition, or nothing without @langchain/langgraph (then only those two of the
 * adapter refuse to work). */
const { ToolNode, toolsCondition: graphToolsCondition } = await import('@langchain/langgraph/prebuilt').catch((err) => {
  // Only LangGraph itself missing; a broken install (one of its own dependencies missing) still throws.
  if (err?.code === 'ERR_MODULE_NOT_FOUND' && /^Cannot find (package|module) '@langchain\/langgraph[/']/.test(String(err.message))) return {}
  throw err
})

export const { langchainTools, toolNode, toolsCondition } = shared.langchainAdapter({
  StructuredTool, AIMessage, ToolMessage, isAIMessage, isBaseMessage, ToolNode, toolsCondition: graphToolsCondition,
})
