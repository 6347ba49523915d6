// toolgate/mcp for ESM: the shared adapter over the ESM build of @modelcontextprotocol/sdk, the copy an ESM app
// imports itself. Imported statically, not awaited: a module without top-level await bundles to CommonJS and loads
// through require(esm); so a missing SDK is Node's own error here, which names the package and this file.
import * as types from '@modelcontextprotocol/sdk/types.js'
import { Server } from '@modelcontextprotocol/sdk/server/index.js'
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js'
import shared from './mcp.shared.js'

export const { mountMcp, serveMcp, mcpHttpHandler } = shared.mcpAdapter({ types, Server, StreamableHTTPServerTransport })
