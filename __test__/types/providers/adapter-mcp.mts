// Type tests of toolgate/mcp against the real @modelcontextprotocol/sdk: its Client and transports are given to
// the adapter as an app gives them. Nothing here runs. The `@ts-expect-error` lines must stay errors. The README's
// examples are the first blocks.

// ── The README examples ──────────────────────────────────────────────────────────────────────────────────────────
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js'
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js'
import { createServer } from 'node:http'
import { ToolExecutor } from 'toolgate'
import { mountMcp, serveMcp, mcpHttpHandler } from 'toolgate/mcp'

export async function mountFiles(root: string) {
  const gate = new ToolExecutor()
  const client = new Client({ name: 'my-agent', version: '1.0.0' })
  await client.connect(new StdioClientTransport({ command: 'npx', args: ['-y', '@modelcontextprotocol/server-filesystem', root] }))
  const files = await mountMcp(gate, client, { prefix: 'files', trust: true, tools: { timeoutMs: 10_000 } })
  const name: string | undefined = files.nameOf('read_text_file') // 'files__read_text_file'
  return { gate, files, name }
}

export async function serveOverStdio(gate: ToolExecutor) {
  const serving = await serveMcp(gate, new StdioServerTransport(), { context: { deniedTools: ['admin_*'] } })
  return serving.server.getClientCapabilities()
}

export function serveOverHttp(gate: ToolExecutor) {
  const handler = mcpHttpHandler(gate, { allowedHosts: ['127.0.0.1:3000'] })
  return createServer((req, res) => void handler(req, res)).listen(3000, '127.0.0.1')
}

// ── Per-request contexts and per-tool fields ────────────────────────────────────────────────────────────────────
interface AppContext { userId: string; [key: string]: unknown }
const typed = new ToolExecutor<AppContext>()
export const perRequest = mcpHttpHandler(typed, { context: (extra) => ({ userId: String(extra.authInfo?.clientId ?? 'anonymous') }) })
export async function perTool(client: Client) {
  const mount = await mountMcp(typed, client, {
    include: ['read_*'],
    tools: (tool) => (tool.annotations?.readOnlyHint ? { cache: { ttlMs: 5_000 } } : { needsApproval: true }),
    onToolsChanged: (m) => console.log(m.tools.map((t) => t.name)),
  })
  // @ts-expect-error a mount may not replace a tool's handler
  await mountMcp(typed, client, { tools: { handler: () => 'x' } })
  // @ts-expect-error a context of the wrong shape
  mcpHttpHandler(typed, { context: { user: 1 } })
  return mount.skipped.map((s) => `${s.mcpName}: ${s.reason}`)
}
