'use strict'
// The MCP server of bench/adapters/mcp.js, over stdio: one tool, `echo` ({ n: integer } → the text n + 1), built
// with the SDK's low-level Server so that the server adds as little of its own to a round trip as it can. Required
// as a module, it gives the tool's definition only.

const { Server } = require('@modelcontextprotocol/sdk/server/index.js')
const { StdioServerTransport } = require('@modelcontextprotocol/sdk/server/stdio.js')
const { CallToolRequestSchema, ListToolsRequestSchema } = require('@modelcontextprotocol/sdk/types.js')

const echo = {
  name: 'echo',
  description: 'Answers n + 1.',
  inputSchema: { type: 'object', properties: { n: { type: 'integer' } }, required: ['n'], additionalProperties: false },
  annotations: { readOnlyHint: true, idempotentHint: true, destructiveHint: false, openWorldHint: false },
}

if (require.main === module) {
  const server = new Server({ name: 'bench-echo', version: '1.0.0' }, { capabilities: { tools: {} } })
  server.setRequestHandler(ListToolsRequestSchema, () => ({ tools: [echo] }))
  server.setRequestHandler(CallToolRequestSchema, ({ params }) => {
    if (params.name !== echo.name) return { isError: true, content: [{ type: 'text', text: `unknown tool ${params.name}` }] }
    return { content: [{ type: 'text', text: String(params.arguments.n + 1) }] }
  })
  server.connect(new StdioServerTransport())
}

module.exports = { echo }
