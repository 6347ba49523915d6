// The ESM entry: the CommonJS entry's own objects, so a program that both imports and requires toolgate gets one
// engine, one set of classes and one `instanceof`. The default export is the CommonJS module itself, as Node's own
// interop gives it.
import toolgate from './index.js'

export const { ToolExecutor, RetryableError, defineTool, formatResults, forLlm, renderTimeline, ERROR_KINDS, RECORDING_VERSION } = toolgate
export default toolgate
