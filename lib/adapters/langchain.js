'use strict'
// toolgate/langchain for CommonJS: the shared adapter over the CommonJS build of @langchain/core (and of
// @langchain/langgraph, when installed), the copy a CommonJS app requires itself.

const { rethrowing } = require('./framework.js')
const { langchainAdapter } = require('./langchain.shared.js')

const { StructuredTool, AIMessage, ToolMessage, isAIMessage, isBaseMessage } = (() => {
  try {
    const { StructuredTool } = require('@langchain/core/tools')
    const { AIMessage, ToolMessage, isAIMessage, isBaseMessage } = require('@langchain/core/messages')
    return { StructuredTool, AIMessage, ToolMessage, isAIMessage, isBaseMessage }
  } catch (err) {
    rethrowing('@langchain/core', 'toolgate/langchain')(err)
  }
})()

/** LangGraph's ToolNode and toolsCondition, or nothing without @langchain/langgraph (then only those two of the
 * adapter refuse to work). */
function optionalLangGraph() {
  try {
    return require('@langchain/langgraph/prebuilt')
  } catch (err) {
    // Only LangGraph itself missing; a broken install (one of its own dependencies missing) still throws.
    if (err?.code === 'MODULE_NOT_FOUND' && String(err.message).startsWith("Cannot find module '@langchain/langgraph/prebuilt'")) return {}
    throw err
  }
}

const { ToolNode, toolsCondition } = optionalLangGraph()

module.exports = langchainAdapter({ StructuredTool, AIMessage, ToolMessage, isAIMessage, isBaseMessage, ToolNode, toolsCondition })
