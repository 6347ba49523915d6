'use strict'
// The package entry: the executor, the provider formats, the timeline renderer and the contract's error kinds.

const { ToolExecutor } = require('./lib/executor.js')
const { RetryableError, ERROR_KINDS } = require('./lib/engine/errors.js')
const { formatResults, forLlm } = require('./lib/formats.js')
const { renderTimeline } = require('./lib/timeline.js')

/** A tool declared apart from `register`: returned as is, so that TypeScript infers its handler's arguments. */
function defineTool(spec) {
  return spec
}

module.exports = { ToolExecutor, RetryableError, defineTool, formatResults, forLlm, renderTimeline, ERROR_KINDS }
