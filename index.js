'use strict'
// The package entry: the executor, the provider formats, the timeline renderer and the contract's error kinds.

const { ToolExecutor } = require('./lib/executor.js')
const { RetryableError, ERROR_KINDS } = require('./lib/errors.js')
const { formatResults, forLlm } = require('./lib/formats.js')
const { renderTimeline } = require('./lib/timeline.js')

module.exports = { ToolExecutor, RetryableError, formatResults, forLlm, renderTimeline, ERROR_KINDS }
