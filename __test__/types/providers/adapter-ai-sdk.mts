// Type tests of toolgate/ai-sdk against the real framework packages: the tools, the repair hook and the manual
// flow's messages given to each AI SDK major's own `generateText`/`streamText` and types, the way an app does.
// Nothing here runs. `ai` is major 5 here (6 and 7 are installed as `ai6`, `ai7`): the tools typed from `ai` are
// checked against 5, and the `jsonSchema` form against every major. The `@ts-expect-error` lines must stay errors.

import { generateText as generateText5, streamText as streamText5, jsonSchema as jsonSchema5 } from 'ai'
import type { ModelMessage as ModelMessage5, ToolCallRepairFunction as ToolCallRepairFunction5, ToolSet as ToolSet5 } from 'ai'
import { generateText as generateText6, jsonSchema as jsonSchema6 } from 'ai6'
import type { ModelMessage as ModelMessage6, ToolCallRepairFunction as ToolCallRepairFunction6, ToolSet as ToolSet6 } from 'ai6'
import { generateText as generateText7, streamText as streamText7, jsonSchema as jsonSchema7 } from 'ai7'
import type { ModelMessage as ModelMessage7, ToolCallRepairFunction as ToolCallRepairFunction7, ToolSet as ToolSet7 } from 'ai7'
import { createAnthropic as createAnthropic5 } from '@ai-sdk/anthropic'
import { createAnthropic as createAnthropic6 } from 'ai-sdk-anthropic6'
import { createAnthropic as createAnthropic7 } from 'ai-sdk-anthropic7'
import { ToolExecutor } from 'toolgate'
import type { ToolResult } from 'toolgate'
import { aiSdkTools, aiSdkRepairToolCall, aiSdkResponseMessages, ToolResultError } from 'toolgate/ai-sdk'
import defaultExport from 'toolgate/ai-sdk'

const gate = new ToolExecutor()

// The README's example (AI SDK 5 here, where `ai` is 5).
export async function readmeExample(): Promise<string> {
  const { text, staticToolResults } = await generateText5({
    model: createAnthropic5({ apiKey: 'x' })('claude-sonnet-4-5'),
    prompt: 'Do I need a coat in Lisbon today?',
    tools: aiSdkTools(gate, { version: 5 }),
    experimental_repairToolCall: aiSdkRepairToolCall(gate),
    stopWhen: ({ steps }) => steps.length >= 5,
  })
  const first: ToolResult | undefined = staticToolResults[0]?.output // each call's output is its ToolResult
  return `${text} ${first?.success}`
}

// Every major's loop, each with its own `jsonSchema` (7 also `streamText`, 5 with the `ai`-typed tools).
export async function loops(controller: AbortController): Promise<void> {
  await streamText5({
    model: createAnthropic5({ apiKey: 'x' })('claude-sonnet-4-5'), prompt: 'Hi', tools: aiSdkTools(gate),
    experimental_repairToolCall: aiSdkRepairToolCall(gate), abortSignal: controller.signal, experimental_context: { userId: 'u_1' },
  }).consumeStream()
  const six = await generateText6({
    model: createAnthropic6({ apiKey: 'x' })('claude-sonnet-4-5'), prompt: 'Hi', tools: aiSdkTools(gate, { jsonSchema: jsonSchema6, version: 6 }),
    experimental_repairToolCall: aiSdkRepairToolCall(gate), experimental_context: { userId: 'u_1' },
  })
  const output6: ToolResult | undefined = six.staticToolResults[0]?.output
  const seven = await generateText7({
    model: createAnthropic7({ apiKey: 'x' })('claude-sonnet-4-5'), prompt: 'Hi', tools: aiSdkTools(gate, { jsonSchema: jsonSchema7 }),
    repairToolCall: aiSdkRepairToolCall(gate, { context: { tenantId: 't' } }),
  })
  const output7: ToolResult | undefined = seven.staticToolResults[0]?.output
  await streamText7({ model: createAnthropic7({ apiKey: 'x' })('claude-sonnet-4-5'), prompt: 'Hi', tools: aiSdkTools(gate, { jsonSchema: jsonSchema7 }) }).consumeStream()
  void [output6, output7]
}

// The manual flow, corrected: one result per call id, in each major's messages.
export async function manualFlows(): Promise<void> {
  const messages5: ModelMessage5[] = [{ role: 'user', content: 'Hi' }]
  const step5 = await generateText5({ model: createAnthropic5({ apiKey: 'x' })('claude-sonnet-4-5'), messages: messages5, tools: gate.definitions('ai-sdk', { jsonSchema: jsonSchema5 }) })
  messages5.push(...aiSdkResponseMessages(step5.response.messages, await gate.execute(step5.toolCalls), { version: 5 }))
  const messages6: ModelMessage6[] = [{ role: 'user', content: 'Hi' }]
  const step6 = await generateText6({ model: createAnthropic6({ apiKey: 'x' })('claude-sonnet-4-5'), messages: messages6, tools: gate.definitions('ai-sdk', { jsonSchema: jsonSchema6 }) })
  messages6.push(...aiSdkResponseMessages(step6.response.messages, await gate.execute(step6.toolCalls), { version: 6 }))
  const messages7: ModelMessage7[] = [{ role: 'user', content: 'Hi' }]
  const step7 = await generateText7({ model: createAnthropic7({ apiKey: 'x' })('claude-sonnet-4-5'), messages: messages7, tools: gate.definitions('ai-sdk', { jsonSchema: jsonSchema7 }) })
  messages7.push(...aiSdkResponseMessages(step7.response.messages, await gate.execute(step7.toolCalls)))
}

export function adapterTypes(results: ToolResult[], error: unknown) {
  const tools5: ToolSet5 = aiSdkTools(gate)
  const tools5WithHelper: ToolSet5 = aiSdkTools(gate, { jsonSchema: jsonSchema5, version: 5 })
  const tools6: ToolSet6 = aiSdkTools(gate, { jsonSchema: jsonSchema6, version: 6 })
  const tools7: ToolSet7 = aiSdkTools(gate, { jsonSchema: jsonSchema7, version: 7 })
  const repair5: ToolCallRepairFunction5<ToolSet5> = aiSdkRepairToolCall(gate)
  const repair6: ToolCallRepairFunction6<ToolSet6> = aiSdkRepairToolCall(gate)
  const repair7: ToolCallRepairFunction7<ToolSet7> = aiSdkRepairToolCall(gate)
  const failed: ToolResult | undefined = error instanceof ToolResultError ? error.result : undefined
  const sameModule: typeof aiSdkTools = defaultExport.aiSdkTools
  // @ts-expect-error another major's jsonSchema makes another major's schemas
  const otherMajorsTools: ToolSet7 = aiSdkTools(gate, { jsonSchema: jsonSchema5 })
  // @ts-expect-error AI SDK 5 takes no `file` image parts (7's, the default) from toModelOutput
  const wrongImages: ToolSet5 = aiSdkTools(gate, { jsonSchema: jsonSchema5 })
  // @ts-expect-error the gate's results for 7 (the default) carry image parts AI SDK 5 does not know
  const wrongMessages: ModelMessage5[] = aiSdkResponseMessages([], results)
  // @ts-expect-error there is no AI SDK 8
  aiSdkTools(gate, { version: 8 })
  // @ts-expect-error the gate must be a ToolExecutor
  aiSdkTools({ definitions: () => [] })
  // @ts-expect-error the repair hook takes no version: it formats nothing
  aiSdkRepairToolCall(gate, { version: 7 })
  return [tools5, tools5WithHelper, tools6, tools7, repair5, repair6, repair7, failed, sameModule, otherMajorsTools, wrongImages, wrongMessages]
}
