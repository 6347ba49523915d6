// The ESM entry of toolgate/ai-sdk: the CommonJS module's own objects, so an app that both imports and requires it
// gets one set of tools, one ToolResultError class and one `instanceof`.
import adapter from './ai-sdk.js'

export const { aiSdkTools, aiSdkRepairToolCall, aiSdkResponseMessages, ToolResultError } = adapter
export default adapter
