'use strict'
// What both directions of toolgate/mcp set on the SDK's own requests.

/** The longest a JS timer waits (a longer one fires at once): the SDK's own request timeout is set to it, so that
 * the gate's limits, which abort the request through its signal, are the ones that hold. */
const MAX_TIMER_MS = 2 ** 31 - 1

module.exports = { MAX_TIMER_MS }
