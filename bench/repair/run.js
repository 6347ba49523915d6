'use strict'
// Runs the repair corpus (bench/repair/corpus.json: real-world tool schemas and the calls models get almost right)
// through toolgate and reports the repair rate and the wrong repairs, next to the same corpus with repair off (what
// a model would otherwise get back: an invalid_arguments round trip). Run by hand after `npm run build`:
// node bench/repair/run.js [--list]. `--list` prints every case that did not come out as expected.

const path = require('node:path')
const assert = require('node:assert/strict')
const { ToolExecutor } = require('../..')

const corpus = require(path.join(__dirname, 'corpus.json'))
const list = process.argv.includes('--list')

async function main() {
  const on = await run({})
  const off = await run({ repair: false })
  console.log(`${corpus.tools.length} tools, ${corpus.cases.length} cases (bench/repair/corpus.json)`)
  console.log('| kind | cases | as expected | wrong | missed | as expected with repair off |')
  console.log('|---|---|---|---|---|---|')
  for (const [kind, row] of Object.entries(on.byKind).sort()) {
    console.log(`| ${kind} | ${row.cases} | ${row.asExpected} | ${row.wrong} | ${row.missed} | ${off.byKind[kind].asExpected} |`)
  }
  for (const [name, r] of [['repair on', on], ['repair off', off]]) {
    console.log(`${name}: ${r.repaired} of ${r.repairable} repairable calls ran as meant (${((100 * r.repaired) / r.repairable).toFixed(1)}%); ` +
      `wrong repairs: ${r.wrong} (run with other arguments than meant, a valid call changed, or a guess where none was safe)`)
  }
  if (list) for (const m of on.misses) console.log(JSON.stringify(m))
}

async function run(options) {
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

main()
