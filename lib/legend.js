'use strict'
// How a call's phases and outcome are drawn: the timeline of a finished turn (timeline.js) and the devtools page
// draw with the same colours and legend. One file serves both: Node requires it, the page loads it as a script.
;(function define(root, make) {
  if (typeof module === 'object' && module.exports) module.exports = make()
  else root.toolgateLegend = make()
})(this, () => {
  /** Phases in legend order: data-phase value, CSS class, legend label, fill. Waits are muted, distinct from each
   * other. */
  const PHASES = [
    ['queued', 'queued', 'queued', '#dde1e6'],
    ['checking', 'checking', 'checking', '#a9d3cd'],
    ['waiting for approval', 'approval', 'waiting for approval', '#ead49a'],
    ['waiting for token', 'token', 'waiting for token', '#c9bfe6'],
    ['waiting for identical call', 'joined', 'waiting for identical call', '#b9cce4'],
    ['retrying', 'backoff', 'retrying (backoff)', 'repeating-linear-gradient(135deg, #f2c4bf 0 4px, #fbe7e5 4px 8px)'],
  ]
  const PHASE_CLASS = Object.fromEntries(PHASES.map(([phase, cls]) => [phase, cls]))

  /** How a running segment (and the row's outcome) is coloured, by the call's final outcome. */
  const OUTCOMES = [
    ['ok', 'success', '#2da44e'],
    ['error', 'handler_error', '#cf222e'],
    ['timeout', 'timeout', '#e8870e'],
    ['stopped', 'cancelled', '#8c959f'],
    ['refused', 'refused / other', '#8250df'],
    ['cached', 'cached', '#218bff'],
  ]

  /** The class a call's final outcome is drawn in. */
  function outcomeClass(result) {
    if (result.cached) return 'cached'
    if (result.success) return 'ok'
    if (result.errorKind === 'handler_error') return 'error'
    if (result.errorKind === 'timeout' || result.errorKind === 'idle_timeout') return 'timeout'
    if (result.errorKind === 'cancelled' || result.errorKind === 'not_executed') return 'stopped'
    return 'refused'
  }

  function outcomeLabel(result) {
    if (result.cached) return 'cached'
    return result.success ? 'ok' : String(result.errorKind || 'error')
  }

  return { PHASES, PHASE_CLASS, OUTCOMES, outcomeClass, outcomeLabel }
})
