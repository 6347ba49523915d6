// toolgate/langchain for ESM: the shared adapter over the ESM build of @langchain/core (and of
// @langchain/langgraph, when installed), the copy an ESM app imports itself.
import shared from './langchain.shared.js'
import framework from './framework.js'

const framed = framework.rethrowing('@langchain/core', 'toolgate/langchain')
const { StructuredTool } = await import('@langchain/core/tools').catch(framed)
const { AIMessage, ToolMessage, isAIMessage, isBaseMessage } = await import('@langchain/core/messages').catch(framed)

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
