// toolgate/mcp for ESM: the shared adapter over the ESM build of @modelcontextprotocol/sdk, the copy an ESM app
// imports itself.
import shared from './mcp.shared.js'
import framework from './framework.js'

const framed = framework.rethrowing('@modelcontextprotocol/sdk', 'toolgate/mcp')
const types = await import('@modelcontextprotocol/sdk/types.js').catch(framed)
const { Server } = await import('@modelcontextprotocol/sdk/server/index.js').catch(framed)
const { StreamableHTTPServerTransport } = await import('@modelcontextprotocol/sdk/server/streamableHttp.js').catch(framed)

export const { mountMcp, serveMcp, mcpHttpHandler } = shared.mcpAdapter({ types, Server, StreamableHTTPServerTransport })
