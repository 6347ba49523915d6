// Types of the ESM entry of toolgate/openai-agents: the same declarations as the CommonJS entry, and the module as
// the default.
import * as adapter from './openai-agents.js'

export * from './openai-agents.js'
export default adapter
