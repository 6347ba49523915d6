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
import { GoogleGenAI } from '@google/genai'
import type { Content, FunctionCall, FunctionDeclaration, Part, Tool as GeminiTool } from '@google/genai'
import { BedrockRuntimeClient, ConverseCommand } from '@aws-sdk/client-bedrock-runtime'
import type { ContentBlock, Message as BedrockMessage, Tool as BedrockTool, ToolConfiguration } from '@aws-sdk/client-bedrock-runtime'
import type { ToolCall as LangChainToolCall, InvalidToolCall } from '@langchain/core/messages/tool'
import type { CallToolRequest } from '@modelcontextprotocol/sdk/types.js'
import { ToolExecutor, formatResults } from 'toolgate'
import type { AISDKVersion, ToolCall, ToolResult } from 'toolgate'

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

// Gemini (@google/genai, the Gemini API and Vertex AI): calls from the model's parts or `functionCalls`.
export async function geminiLoop(ai: GoogleGenAI): Promise<void> {
  const contents: Content[] = [{ role: 'user', parts: [{ text: 'Do I need a coat in Lisbon today?' }] }]
  const config = { tools: [{ functionDeclarations: gate.definitions('gemini') }] }
  for (;;) {
    const response = await ai.models.generateContent({ model: 'gemini-3-pro-preview', contents, config })
    const content = response.candidates?.[0]?.content
    const calls = (content?.parts ?? []).filter((part) => part.functionCall)
    if (content === undefined || calls.length === 0) break
    contents.push(content, formatResults(await gate.execute(calls), 'gemini'))
  }
}
export async function geminiFunctionCalls(ai: GoogleGenAI, contents: Content[]): Promise<Content> {
  const response = await ai.models.generateContent({ model: 'gemini-3-pro-preview', contents })
  return formatResults(await gate.execute(response.functionCalls ?? []), 'gemini', { images: false })
}
export function geminiTypes(results: ToolResult[], call: FunctionCall) {
  const declarations: FunctionDeclaration[] = gate.definitions('gemini')
  const tools: GeminiTool[] = [{ functionDeclarations: gate.definitions('gemini') }]
  const content: Content = formatResults(results, 'gemini')
  const part: Part = formatResults(results, 'gemini').parts[0]
  const calls: ToolCall[] = [call, { functionCall: call }]
  // @ts-expect-error Chat Completions tools are no function declarations
  const wrongDeclarations: FunctionDeclaration[] = gate.definitions('openai-chat')
  // @ts-expect-error a Bedrock toolResult block is no Gemini part
  const wrongContent: Part = formatResults(results, 'bedrock').content[0]
  // @ts-expect-error 'gemini' takes images, not version
  formatResults(results, 'gemini', { version: 7 })
  return [declarations, tools, content, part, calls, wrongDeclarations, wrongContent]
}

// Amazon Bedrock Converse (@aws-sdk/client-bedrock-runtime): calls from the message's toolUse blocks.
export async function bedrockLoop(client: BedrockRuntimeClient): Promise<void> {
  const messages: BedrockMessage[] = [{ role: 'user', content: [{ text: 'Do I need a coat in Lisbon today?' }] }]
  const toolConfig: ToolConfiguration = { tools: gate.definitions('bedrock') }
  for (;;) {
    const response = await client.send(new ConverseCommand({ modelId: 'anthropic.claude-sonnet-4-5-20250929-v1:0', messages, toolConfig }))
    const message = response.output?.message
    const calls = (message?.content ?? []).filter((block) => block.toolUse)
    if (message === undefined || calls.length === 0) break
    messages.push(message, formatResults(await gate.execute(calls), 'bedrock'))
  }
}
export function bedrockTypes(results: ToolResult[], block: ContentBlock.ToolUseMember) {
  const tools: BedrockTool[] = gate.definitions('bedrock')
  const message: BedrockMessage = formatResults(results, 'bedrock')
  const content: ContentBlock[] = formatResults(results, 'bedrock').content
  const calls: ToolCall[] = [block]
  // @ts-expect-error Gemini declarations are no Bedrock tools
  const wrongTools: BedrockTool[] = gate.definitions('gemini')
  // @ts-expect-error an Anthropic message is no Bedrock message
  const wrongMessage: BedrockMessage = formatResults(results, 'anthropic')
  // @ts-expect-error 'bedrock' takes no options
  formatResults(results, 'bedrock', { images: false })
  return [tools, message, content, calls, wrongTools, wrongMessage]
}

// LangChain's ToolCall and InvalidToolCall, and MCP's tools/call params, as they are.
export function callTypes(langchain: LangChainToolCall, invalid: InvalidToolCall, mcp: CallToolRequest['params']) {
  const calls: ToolCall[] = [langchain, invalid, mcp]
  // @ts-expect-error a call is an object
  const notACall: ToolCall[] = ['search']
  return [calls, notACall]
}
