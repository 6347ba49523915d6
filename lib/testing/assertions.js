'use strict'
// Checks of a ToolResult for any test runner: `expectResult(result).toSucceed()` throws node:assert's
// AssertionError, and `expect.extend(toolgateMatchers)` gives vitest and jest the same checks as matchers.

const { AssertionError } = require('node:assert')
const { inspect } = require('node:util')
const { ERROR_KINDS } = require('../../index.js')

/** A value as a message shows it; a long output is cut, so that a flood does not bury the message. */
const show = (value) => inspect(value, { maxStringLength: 500, breakLength: Infinity })

/** What every message shows of the result: enough to see what happened instead. */
function describeResult(r) {
  return [
    `  tool: ${show(r.name)} (call ${show(r.callId)})`,
    `  success: ${r.success}, errorKind: ${r.errorKind ?? '(none)'}, attempts: ${r.attempts}, cached: ${r.cached}, truncated: ${r.truncated}`,
    `  output: ${show(r.output)}`,
  ].join('\n')
}

/**
 * An expected text: `undefined` (anything goes), a RegExp (must match; `search` ignores a global regex's
 * lastIndex) or a string (must pass `sameText`). Returns the test and how the expectation reads; anything else
 * is a mistake in the test, not a failed check.
 */
function expectedText(expected, check, sameText, relation) {
  if (expected === undefined) return { fits: () => true, wording: '' }
  if (expected instanceof RegExp) return { fits: (text) => typeof text === 'string' && text.search(expected) !== -1, wording: ` matching ${expected}` }
  if (typeof expected === 'string') return { fits: (text) => typeof text === 'string' && sameText(text, expected), wording: ` ${relation} ${show(expected)}` }
  throw new TypeError(`${check}: expected a string or a RegExp, got ${show(expected)}`)
}

/**
 * Each check: `(result, ...expected) => { pass, expectation }`, the expectation worded so that "expected the result
 * (not) to …" reads right both ways (a matcher under `.not` reports a pass as the failure).
 */
const CHECKS = {
  toSucceed(r, output) {
    const text = expectedText(output, 'toSucceed', (a, b) => a === b, 'equal to')
    return { pass: r.success === true && text.fits(r.output), expectation: `to succeed${text.wording && ` with output${text.wording}`}` }
  },
  toFailWith(r, kind, fragment) {
    if (!ERROR_KINDS.includes(kind)) throw new TypeError(`toFailWith: kind must be one of ${ERROR_KINDS.join(', ')}; got ${show(kind)}`)
    const text = expectedText(fragment, 'toFailWith', (a, b) => a.includes(b), 'containing')
    return {
      pass: r.success === false && r.errorKind === kind && text.fits(r.error),
      expectation: `to fail with ${kind}${text.wording && ` and an error${text.wording}`}`,
    }
  },
  toHaveRetried(r, n) {
    if (!Number.isInteger(n) || n < 0) throw new TypeError(`toHaveRetried: n must be a whole number of retries, got ${show(n)}`)
    return { pass: r.attempts === n + 1, expectation: `to have been retried ${n} time${n === 1 ? '' : 's'} (attempts: ${n + 1})` }
  },
  toBeCached: (r) => ({ pass: r.cached === true, expectation: 'to be answered from the cache' }),
  toBeTruncated: (r) => ({ pass: r.truncated === true, expectation: 'to be truncated' }),
}

/** Runs check `name` on `received`: `{ pass, message }`, the message worded for whichever way the check failed. */
function run(name, received, expected) {
  if (received === null || typeof received !== 'object' || typeof received.success !== 'boolean' || typeof received.callId !== 'string') {
    throw new TypeError(`${name}: expected a ToolResult (one element of the array execute() resolved to), got ${show(received)}`)
  }
  const { pass, expectation } = CHECKS[name](received, ...expected)
  return { pass, message: `expected the result ${pass ? 'not ' : ''}${expectation}\n${describeResult(received)}` }
}

/** `expectResult(result).toSucceed()` and the rest: each throws an AssertionError when its check fails, and returns
 * the expectation so that checks chain. */
function expectResult(result) {
  const expectation = {}
  for (const name of Object.keys(CHECKS)) {
    expectation[name] = function check(...expected) {
      const { pass, message } = run(name, result, expected)
      if (!pass) throw new AssertionError({ message, operator: name, stackStartFn: check })
      return expectation
    }
  }
  return expectation
}

/** For `expect.extend(toolgateMatchers)`: the same checks as matchers, `.not` included. */
const toolgateMatchers = Object.fromEntries(
  Object.keys(CHECKS).map((name) => [name, (received, ...expected) => {
    const { pass, message } = run(name, received, expected)
    return { pass, message: () => message }
  }]),
)

module.exports = { expectResult, toolgateMatchers }
