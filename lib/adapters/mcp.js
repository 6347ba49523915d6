'use strict'
// toolgate/mcp for CommonJS: the shared adapter over the CommonJS build of @modelcontextprotocol/sdk, the copy a
// CommonJS app requires itself.

const { rethrowing } = require('./framework.js')
const { mcpAdapter } = require('./mcp.shared.js')

const sdk = (() => {
  try {
    return {
      types: require('@modelcontextprotocol/sdk/types.js'),
      Server: require('@modelcontextprotocol/sdk/server/index.js').Server,
      StreamableHTTPServerTransport: require('@modelcontextprotocol/sdk/server/streamableHttp.js').StreamableHTTPServerTransport,
    }
  } catch (err) {
    rethrowing('@modelcontextprotocol/sdk', 'toolgate/mcp')(err)
  }
})()

module.exports = mcpAdapter(sdk)
