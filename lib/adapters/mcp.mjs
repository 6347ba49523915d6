// toolgate/mcp for ESM: the shared adapter over the ESM build of @modelcontextprotocol/sdk, the copy an ESM app
// imports itself.
import * as types from '@modelcontextprotocol/sdk/types.js'
import { Server } from '@modelcontextprotocol/sdk/server/index.js'
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js'
import shared from './mcp.shared.js'

export const { mountMcp, serveMcp, mcpHttpHandler } = shared.mcpAdapter({ types, Server, StreamableHTTPServerTransport })
