// Types of the ESM entry of toolgate/mcp: the same declarations as the CommonJS entry.
export * from './mcp.js'
