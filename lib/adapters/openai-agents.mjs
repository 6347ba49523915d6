// The ESM entry of toolgate/openai-agents: the CommonJS module's own objects (it imports nothing from the SDK), so
// an app that both imports and requires it shares one set of remembered interruptions and decisions.
import adapter from './openai-agents.js'

export const { openAiAgentsTools, openAiAgentsRunConfig, openAiAgentsApproval, openAiAgentsModel, openAiAgentsModelProvider } = adapter
export default adapter
