// Types of the ESM entry of toolgate/ai-sdk: the same declarations as the CommonJS entry, and the module as the
// default.
import * as adapter from './ai-sdk.js'

export * from './ai-sdk.js'
export default adapter
