'use strict'
// Scores the repair corpus (corpus.json: real-world tool schemas and the calls models get almost right) through
// toolgate: per kind, the cases that came out as expected, the wrong repairs and the misses. Used by run.js (the
// report) and by the test suite (every case as expected).

const path = require('node:path')
const assert = require('node:assert/strict')
const { ToolExecutor } = require('../..')

const corpus = require(path.join(__dirname, 'corpus.json'))

/** The corpus run through an executor with these options. */
async function score(options = {}) {
  const gate = new ToolExecutor({ dedup: { policy: 'off' }, ...options })
  const received = new Map()
  for (const tool of corpus.tools) {
    gate.register({ ...tool, handler: (args, ctx) => { received.set(ctx.callId, args); return 'ok' } })
  }
  const calls = corpus.cases.map((c) => ({ type: 'function_call', call_id: c.id, name: c.tool, arguments: c.arguments }))
  const results = await gate.execute(calls)

  const byKind = {}
  const misses = []
  let repaired = 0
  let repairable = 0
  let wrong = 0
  for (const [i, c] of corpus.cases.entries()) {
    const r = results[i]
    const ran = received.has(c.id)
    const got = received.get(c.id)
    const row = (byKind[c.kind] ??= { cases: 0, asExpected: 0, wrong: 0, missed: 0 })
    row.cases += 1
    let outcome
    if (c.expect === null) {
      // Must not be guessed: the call stays invalid_arguments and never runs.
      outcome = !ran && r.errorKind === 'invalid_arguments' ? 'as expected' : 'wrong'
    } else if (!ran) {
      outcome = 'missed'
    } else {
      outcome = sameValue(got, c.expect) ? 'as expected' : 'wrong'
      // A valid call must reach the handler untouched, with no repair recorded.
      if (c.kind === 'valid' && r.metadata.repairs !== undefined) outcome = 'wrong'
    }
    if (c.expect !== null && c.kind !== 'valid') {
      repairable += 1
      if (outcome === 'as expected') repaired += 1
    }
    if (outcome === 'wrong') wrong += 1
    if (outcome === 'as expected') row.asExpected += 1
    else if (outcome === 'wrong') row.wrong += 1
    else row.missed += 1
    if (outcome !== 'as expected') misses.push({ id: c.id, outcome, arguments: c.arguments, expect: c.expect, got: ran ? got : r.error })
  }

  return { byKind, misses, repaired, repairable, wrong }
}

/** Deep equality with numbers compared by value (1000 and 1000.0 are the same argument). */
function sameValue(a, b) {
  try {
    assert.deepStrictEqual(a, b)
    return true
  } catch {
    return false
  }
}

module.exports = { corpus, score }
