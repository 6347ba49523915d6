// What README examples use without importing or declaring it, as a reader's program already has: toolgate's
// exports (the first example shows the import), an executor, provider clients, and a turn's calls and results.
import type * as toolgate from 'toolgate'
import type Anthropic from '@anthropic-ai/sdk'
import type OpenAI from 'openai'
import type { GoogleGenAI } from '@google/genai'
import type { BedrockRuntimeClient } from '@aws-sdk/client-bedrock-runtime'

declare global {
  const ToolExecutor: typeof toolgate.ToolExecutor
  type ToolExecutor = toolgate.ToolExecutor
  const RetryableError: typeof toolgate.RetryableError
  const defineTool: typeof toolgate.defineTool
  const formatResults: typeof toolgate.formatResults
  const forLlm: typeof toolgate.forLlm
  const renderTimeline: typeof toolgate.renderTimeline
  const gate: toolgate.ToolExecutor
  const calls: toolgate.ToolCall[]
  const results: toolgate.ToolResult[]
  const result: toolgate.ToolResult
  const handler: () => string
  const controller: AbortController
  const anthropic: Anthropic
  const openai: OpenAI
  const genai: GoogleGenAI
  const bedrock: BedrockRuntimeClient
  // The application's own parts.
  const ui: { update(callId: string, info: unknown): void }
  function askTheUser(toolName: string, args: unknown): Promise<boolean>
  const langfuse: { ingest(events: unknown[]): void }
  const db: { insert(record: unknown): void }
  interface HttpResponse { type(mime: string): HttpResponse; send(body: string): void; json(body: unknown): void }
  const app: { get(path: string, handle: (req: unknown, res: HttpResponse) => void): void }
}
