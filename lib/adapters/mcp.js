'use strict'
// toolgate/mcp for CommonJS: the shared adapter over the CommonJS build of @modelcontextprotocol/sdk, the copy a
// CommonJS app requires itself.

const types = require('@modelcontextprotocol/sdk/types.js')
const { Server } = require('@modelcontextprotocol/sdk/server/index.js')
const { StreamableHTTPServerTransport } = require('@modelcontextprotocol/sdk/server/streamableHttp.js')
const { mcpAdapter } = require('./mcp.shared.js')

module.exports = mcpAdapter({ types, Server, StreamableHTTPServerTransport })
