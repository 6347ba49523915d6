'use strict'
// The repair corpus (bench/repair/corpus.json): every case of every kind comes out as expected, with repair on;
// with repair off, none of the repairable calls runs and no call is changed.

const { describe, it } = require('node:test')
const assert = require('node:assert/strict')
const { corpus, score } = require('../bench/repair/score.js')

describe('repair corpus', () => {
  it('repairs every repairable call as meant, changes no valid call and guesses none', async () => {
    const on = await score()
    assert.deepEqual(on.misses, [], 'every case as expected')
    assert.equal(on.repaired, on.repairable)
    const kinds = Object.keys(on.byKind)
    for (const kind of ['wrapper', 'call-echo', 'text-around', 'tags-around', 'json-comments', 'double-encoded', 'envelope-refused']) {
      assert.ok(kinds.includes(kind), `the corpus has ${kind} cases`)
      assert.ok(on.byKind[kind].cases >= 10, `${kind}: ${on.byKind[kind].cases} cases`)
    }
    assert.equal(Object.values(on.byKind).reduce((n, row) => n + row.cases, 0), corpus.cases.length)
  })

  it('runs none of the repairable calls with repair off', async () => {
    const off = await score({ repair: false })
    assert.equal(off.repaired, 0)
    assert.equal(off.wrong, 0)
  })
})
