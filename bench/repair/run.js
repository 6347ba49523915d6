'use strict'
// Runs the repair corpus (bench/repair/corpus.json) through toolgate and reports the repair rate and the wrong
// repairs per kind, next to the same corpus with repair off (what a model would otherwise get back: an
// invalid_arguments round trip). Run by hand after `npm run build`: node bench/repair/run.js [--list]. `--list`
// prints every case that did not come out as expected. The test suite holds every case to its expectation.

const { corpus, score } = require('./score.js')

const list = process.argv.includes('--list')

async function main() {
  const on = await score({})
  const off = await score({ repair: false })
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

main()
