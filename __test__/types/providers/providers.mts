// Compiled with `tsc -p __test__/types/providers`: what `definitions` and `formatResults` return, given to the
// provider SDKs' own parameter types, the way a user's agent loop does. Nothing here runs. The `@ts-expect-error`
// lines must stay errors: they show the types tell the formats and the AI SDK majors apart. A project of its own
// because the SDKs' types need Node's ESM resolution (package `exports`; ai 7 ships ESM only): an ESM file, which
// also checks the types `import 'toolgate'` gets.

import Anthropic from '@anthropic-ai/sdk'
import OpenAI from 'openai'
import { generateText as generateText5, jsonSchema as jsonSchema5 } from 'ai'
import type { ModelMessage as ModelMessage5, ToolModelMessage as ToolModelMessage5, ToolSet as ToolSet5 } from 'ai'
import { generateText as generateText6, jsonSchema as jsonSchema6 } from 'ai6'
import type { ModelMessage as ModelMessage6, ToolModelMessage as ToolModelMessage6, ToolSet as ToolSet6 } from 'ai6'
import { generateText as generateText7, jsonSchema as jsonSchema7 } from 'ai7'
import type { ModelMessage as ModelMessage7, ToolModelMessage as ToolModelMessage7, ToolSet as ToolSet7 } from 'ai7'
import { createAnthropic as createAnthropic5 } from '@ai-sdk/anthropic'
import { createAnthropic as createAnthropic6 } from 'ai-sdk-anthropic6'
import { createAnthropic as createAnthropic7 } from 'ai-sdk-anthropic7'
import { createOpenAI as createOpenAI5 } from '@ai-sdk/openai'
import { createOpenAI as createOpenAI6 } from 'ai-sdk-openai6'
import { createOpenAI as createOpenAI7 } from 'ai-sdk-openai7'
import { ToolExecutor, formatResults } from 'toolgate'
import type { AISDKVersion, ToolResult } from 'toolgate'

const gate = new ToolExecutor()

// Anthropic Messages: the README's first example, and the types one by one.
export async function anthropicLoop(client: Anthropic): Promise<void> {
  const messages: Anthropic.MessageParam[] = [{ role: 'user', content: 'Do I need a coat in Lisbon today?' }]
  for (;;) {
    const reply = await client.messages.create({ model: 'claude-sonnet-4-5', max_tokens: 1024, tools: gate.definitions('anthropic'), messages })
    messages.push({ role: 'assistant', content: reply.content })
    const calls = reply.content.filter((block) => block.type === 'tool_use')
    if (calls.length === 0) break
    const results = await gate.execute(calls)
    messages.push(formatResults(results, 'anthropic'))
  }
}
export function anthropicTypes(results: ToolResult[]) {
  const tools: Anthropic.Tool[] = gate.definitions('anthropic')
  const unions: Anthropic.ToolUnion[] = gate.definitions('anthropic')
  const message: Anthropic.MessageParam = formatResults(results, 'anthropic')
  const block: Anthropic.ToolResultBlockParam = formatResults(results, 'anthropic').content[0]
  // @ts-expect-error Chat Completions tool definitions are not Anthropic tools
  const wrongTools: Anthropic.ToolUnion[] = gate.definitions('openai-chat')
  // @ts-expect-error an AI SDK tool message is not an Anthropic message
  const wrongMessage: Anthropic.MessageParam = formatResults(results, 'ai-sdk')
  // @ts-expect-error only 'ai-sdk' takes options
  formatResults(results, 'anthropic', { version: 7 })
  return [tools, unions, message, block, wrongTools, wrongMessage]
}

// OpenAI Responses and Chat Completions.
export async function responsesLoop(client: OpenAI): Promise<void> {
  const input: OpenAI.Responses.ResponseInput = [{ role: 'user', content: 'Do I need a coat in Lisbon today?' }]
  for (;;) {
    const response = await client.responses.create({ model: 'gpt-5', input, tools: gate.definitions('openai-responses') })
    const calls = response.output.filter((item) => item.type === 'function_call')
    if (calls.length === 0) break
    input.push(...calls, ...formatResults(await gate.execute(calls), 'openai-responses'))
  }
}
export async function chatLoop(client: OpenAI): Promise<void> {
  const messages: OpenAI.Chat.ChatCompletionMessageParam[] = [{ role: 'user', content: 'Do I need a coat in Lisbon today?' }]
  for (;;) {
    const completion = await client.chat.completions.create({ model: 'gpt-5', messages, tools: gate.definitions('openai-chat') })
    const reply = completion.choices[0].message
    messages.push(reply)
    const calls = (reply.tool_calls ?? []).filter((call) => call.type === 'function')
    if (calls.length === 0) break
    messages.push(...formatResults(await gate.execute(calls), 'openai-chat'))
  }
}
export function openaiTypes(results: ToolResult[]) {
  const functionTools: OpenAI.Responses.FunctionTool[] = gate.definitions('openai-responses')
  const responsesTools: OpenAI.Responses.Tool[] = gate.definitions('openai-responses')
  const items: OpenAI.Responses.ResponseInputItem[] = formatResults(results, 'openai-responses')
  const chatTools: OpenAI.Chat.ChatCompletionTool[] = gate.definitions('openai-chat')
  const chatMessages: OpenAI.Chat.ChatCompletionMessageParam[] = formatResults(results, 'openai-chat')
  const toolMessage: OpenAI.Chat.ChatCompletionToolMessageParam = formatResults(results, 'openai-chat')[0]
  // @ts-expect-error Chat Completions tool definitions are not Responses tools
  const wrongTools: OpenAI.Responses.Tool[] = gate.definitions('openai-chat')
  // @ts-expect-error Chat Completions tool messages are not Responses input items
  const wrongItems: OpenAI.Responses.ResponseInputItem[] = formatResults(results, 'openai-chat')
  // @ts-expect-error an Anthropic message is not a Chat Completions message
  const wrongMessage: OpenAI.Chat.ChatCompletionMessageParam = formatResults(results, 'anthropic')
  return [functionTools, responsesTools, items, chatTools, chatMessages, toolMessage, wrongTools, wrongItems, wrongMessage]
}

// The AI SDK, each major with its own providers, `jsonSchema` helper and `version`.
export async function aiSdk5Loop(): Promise<void> {
  const messages: ModelMessage5[] = [{ role: 'user', content: 'Do I need a coat in Lisbon today?' }]
  for (const model of [createAnthropic5({ apiKey: 'x' })('claude-sonnet-4-5'), createOpenAI5({ apiKey: 'x' })('gpt-5')]) {
    const { toolCalls, response } = await generateText5({ model, messages, tools: gate.definitions('ai-sdk', { jsonSchema: jsonSchema5 }) })
    messages.push(...response.messages, formatResults(await gate.execute(toolCalls), 'ai-sdk', { version: 5 }))
  }
}
export async function aiSdk6Loop(): Promise<void> {
  const messages: ModelMessage6[] = [{ role: 'user', content: 'Do I need a coat in Lisbon today?' }]
  for (const model of [createAnthropic6({ apiKey: 'x' })('claude-sonnet-4-5'), createOpenAI6({ apiKey: 'x' })('gpt-5')]) {
    const { toolCalls, response } = await generateText6({ model, messages, tools: gate.definitions('ai-sdk', { jsonSchema: jsonSchema6 }) })
    messages.push(...response.messages, formatResults(await gate.execute(toolCalls), 'ai-sdk', { version: 6 }))
  }
}
export async function aiSdk7Loop(): Promise<void> {
  const messages: ModelMessage7[] = [{ role: 'user', content: 'Do I need a coat in Lisbon today?' }]
  for (const model of [createAnthropic7({ apiKey: 'x' })('claude-sonnet-4-5'), createOpenAI7({ apiKey: 'x' })('gpt-5')]) {
    const { toolCalls, response } = await generateText7({ model, messages, tools: gate.definitions('ai-sdk', { jsonSchema: jsonSchema7 }) })
    messages.push(...response.messages, formatResults(await gate.execute(toolCalls), 'ai-sdk'))
  }
}
export function aiSdkTypes(results: ToolResult[], someVersion: AISDKVersion) {
  const tools5: ToolSet5 = gate.definitions('ai-sdk', { jsonSchema: jsonSchema5 })
  const tools6: ToolSet6 = gate.definitions('ai-sdk', { jsonSchema: jsonSchema6 })
  const tools7: ToolSet7 = gate.definitions('ai-sdk', { jsonSchema: jsonSchema7 })
  const message5: ToolModelMessage5 = formatResults(results, 'ai-sdk', { version: 5 })
  const message6: ToolModelMessage6 = formatResults(results, 'ai-sdk', { version: 6 })
  const message7: ToolModelMessage7 = formatResults(results, 'ai-sdk', { version: 7 })
  const byDefault: ToolModelMessage7 = formatResults(results, 'ai-sdk')
  // @ts-expect-error without the helper: the provider-level list, not a ToolSet
  const wrongTools: ToolSet7 = gate.definitions('ai-sdk')
  // @ts-expect-error another major's jsonSchema makes another major's schemas
  const otherMajorsTools: ToolSet7 = gate.definitions('ai-sdk', { jsonSchema: jsonSchema5 })
  // @ts-expect-error AI SDK 7's providers drop 5's `media` image parts
  const wrong7: ToolModelMessage7 = formatResults(results, 'ai-sdk', { version: 5 })
  // @ts-expect-error AI SDK 6 knows no `file` image part (7's, the default)
  const wrong6: ToolModelMessage6 = formatResults(results, 'ai-sdk')
  // @ts-expect-error AI SDK 5 knows no `image-data` image part
  const wrong5: ToolModelMessage5 = formatResults(results, 'ai-sdk', { version: 6 })
  // @ts-expect-error a version not known at compile time fits no one major
  const unknownMajor: ToolModelMessage7 = formatResults(results, 'ai-sdk', { version: someVersion })
  // @ts-expect-error there is no AI SDK 8 format yet
  formatResults(results, 'ai-sdk', { version: 8 })
  return [tools5, tools6, tools7, message5, message6, message7, byDefault, wrongTools, otherMajorsTools, wrong7, wrong6, wrong5, unknownMajor]
}
