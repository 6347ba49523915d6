// Types of toolgate/langchain for CommonJS: the shared declarations over @langchain/core's CommonJS types.
import type { StructuredTool } from '@langchain/core/tools'
import type { ToolNode, toolsCondition as graphToolsCondition } from '@langchain/langgraph/prebuilt'
import type { LangchainAdapter } from './langchain.shared.js'

export type { LangchainAdapterOptions } from './langchain.shared.js'
type Adapter = LangchainAdapter<StructuredTool, ToolNode, typeof graphToolsCondition>
export declare const langchainTools: Adapter['langchainTools']
export declare const toolNode: Adapter['toolNode']
export declare const toolsCondition: Adapter['toolsCondition']
