// Type tests of toolgate/openai-agents against the real @openai/agents: the tools, the wrapped model and provider,
// the Runner options and the approval callback given to the SDK's own Agent, Runner, run and RunState, and to the
// ToolExecutor, the way an app does. Nothing here runs. The `@ts-expect-error` lines must stay errors.

import { Agent, OpenAIProvider, Runner, RunState, run } from '@openai/agents'
import type { FunctionTool, Model, ModelProvider, RunContext, RunConfig, Tool, ToolErrorFormatter } from '@openai/agents'
import { ToolExecutor } from 'toolgate'
import {
  openAiAgentsApproval,
  openAiAgentsModel,
  openAiAgentsModelProvider,
  openAiAgentsRunConfig,
  openAiAgentsTools,
} from 'toolgate/openai-agents'
import type { OpenAIAgentsToolOutput } from 'toolgate/openai-agents'
import defaultExport from 'toolgate/openai-agents'

declare const myModel: Model
declare function askTheUser(toolName: string, args: unknown): Promise<boolean>

// The README's example.
export async function readmeExample(): Promise<unknown> {
  const gate = new ToolExecutor({
    // Hears what the run's user decided on an interruption; other asks go to your own callback.
    approve: openAiAgentsApproval(async ({ toolName, arguments: args }) => askTheUser(toolName, args)),
  })
  gate.register({
    name: 'deploy',
    needsApproval: true,
    parameters: { type: 'object', properties: { service: { type: 'string' } }, required: ['service'] },
    handler: ({ service }) => `deployed ${service}`,
  })

  const agent = new Agent({
    name: 'ops',
    instructions: 'Deploy what the user asks for.',
    model: openAiAgentsModel(gate, myModel), // or: new Runner({ modelProvider: openAiAgentsModelProvider(gate, new OpenAIProvider()) })
    tools: openAiAgentsTools(gate),
  })
  const runner = new Runner(openAiAgentsRunConfig(gate))

  let result = await runner.run(agent, 'Deploy the billing service', { context: { userId: 'u_42' } })
  while (result.interruptions.length > 0) {
    const state: RunState<{ userId: string }, typeof agent> = result.state
    for (const interruption of result.interruptions) {
      if (await askTheUser(interruption.name ?? '', interruption.arguments)) state.approve(interruption)
      else state.reject(interruption)
    }
    result = await runner.run(agent, state)
  }
  return result.finalOutput
}

const gate = new ToolExecutor()

// The tools are the SDK's FunctionTools, and Tools of an Agent of any context.
const tools: FunctionTool<unknown, undefined, OpenAIAgentsToolOutput>[] = openAiAgentsTools(gate)
const asTools: Tool<{ userId: string }>[] = openAiAgentsTools(gate)
export const typedAgent = new Agent<{ userId: string }>({ name: 'a', tools: asTools })
export const anyAgent = new Agent({ name: 'b', tools })

// The context: an object, or a function of the run's RunContext.
openAiAgentsTools(gate, { context: { allowedTools: ['read_*'] } })
openAiAgentsTools(gate, { context: (runContext: RunContext<{ tenant: string }>) => ({ tenantId: runContext.context.tenant }) })
// @ts-expect-error a context is the gate's execution context, not a string
openAiAgentsTools(gate, { context: 'tenant_1' })
// @ts-expect-error no such option
openAiAgentsTools(gate, { strict: true })
// @ts-expect-error the gate comes first
openAiAgentsTools({ tools: [] })

// The wrapped model and provider are the SDK's Model and ModelProvider.
const model: Model = openAiAgentsModel(gate, myModel)
const provider: ModelProvider = openAiAgentsModelProvider(gate, new OpenAIProvider())
export const withModel = new Agent({ name: 'c', model, tools })
export const withProvider = new Runner({ modelProvider: provider, ...openAiAgentsRunConfig(gate) })
// @ts-expect-error a model name is not a Model: wrap the provider
openAiAgentsModel(gate, 'gpt-5')

// The Runner options: for a Runner's config and for one run's options alike.
const config: Partial<RunConfig> = openAiAgentsRunConfig(gate)
const formatter: ToolErrorFormatter = openAiAgentsRunConfig(gate).toolErrorFormatter
export const runner = new Runner({ ...config, toolErrorFormatter: formatter })
export async function oneRun(): Promise<unknown> {
  const result = await run(anyAgent, 'Hi', { ...openAiAgentsRunConfig(gate), context: { sessionId: 's_1' } })
  return result.finalOutput
}
// @ts-expect-error the formatter returns text, not a result
const wrongFormatter: (args: Parameters<ToolErrorFormatter>[0]) => Promise<number> = openAiAgentsRunConfig(gate).toolErrorFormatter
export { wrongFormatter }

// The approval callback is an executor's `approve`, with or without a fallback.
export const approving = new ToolExecutor({ approve: openAiAgentsApproval() })
new ToolExecutor({ approve: openAiAgentsApproval(() => ({ decision: 'deny', reason: 'ask in the app' })) })
// @ts-expect-error the fallback answers an approval request
openAiAgentsApproval(() => 'maybe')

// The default export is the module.
const fromDefault: typeof openAiAgentsTools = defaultExport.openAiAgentsTools
export { fromDefault }
