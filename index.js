'use strict'
// The package entry: the executor, the provider formats, the timeline renderer, the contract's error kinds and the
// version of the recordings the executor writes.

const { ToolExecutor } = require('./lib/executor.js')
const { RetryableError, ERROR_KINDS } = require('./lib/engine/errors.js')
const { formatResults, forLlm } = require('./lib/formats.js')
const { renderTimeline } = require('./lib/timeline.js')
const { RECORDING_VERSION } = require('./lib/executor/recording.js')

/** A tool declared apart from `register`: returned as is, so that TypeScript infers its handler's arguments. */
function defineTool(spec) {
  return spec
}

module.exports = { ToolExecutor, RetryableError, defineTool, formatResults, forLlm, renderTimeline, ERROR_KINDS, RECORDING_VERSION }
