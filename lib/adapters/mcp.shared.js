'use strict'
// toolgate/mcp over one copy of the MCP SDK: the CommonJS entry hands it the CommonJS build, the ESM entry the ESM
// build, so that the schemas and classes it uses are those of the copy the app itself loads.

const { mountMcp } = require('./mcp-mount.js')
const { serveMcp, mcpHttpHandler } = require('./mcp-serve.js')

/** `sdk`: `{ types, Server, StreamableHTTPServerTransport }` of one build of @modelcontextprotocol/sdk. */
function mcpAdapter(sdk) {
  return {
    mountMcp: (gate, client, options) => mountMcp(sdk, gate, client, options),
    serveMcp: (gate, transport, options) => serveMcp(sdk, gate, transport, options),
    mcpHttpHandler: (gate, options) => mcpHttpHandler(sdk, gate, options),
  }
}

module.exports = { mcpAdapter }
