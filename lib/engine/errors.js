'use strict'
// The contract's failure kinds, and the error a handler throws to ask for another attempt.

const ERROR_KINDS = Object.freeze([
  'unknown_tool', 'invalid_arguments', 'permission_denied', 'approval_denied', 'rate_limited', 'timeout',
  'idle_timeout', 'cancelled', 'not_executed', 'handler_error', 'duplicate', 'unavailable', 'budget_exceeded',
])

/** Throw it (or set `retryable: true` on any error) to ask for another attempt under the tool's retry policy. */
class RetryableError extends Error {
  constructor(message, options = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause })
    this.name = 'RetryableError'
    this.retryable = true
    if (options.retryAfterMs !== undefined) this.retryAfterMs = options.retryAfterMs
  }
}

module.exports = { ERROR_KINDS, RetryableError }
