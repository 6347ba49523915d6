'use strict'
// `node bench/compare.js <checkout> [runs]`: what a change costs per call. The suite's throughput scenario runs with
// the executor of another checkout (built: `npm run build` there) beside this one's, interleaved sample by sample
// in one process (BENCH_OTHER, see lib.js), `runs` times (3 by default); prints, per scenario and figure, the median
// over the runs of the per-sample ratio this / other, and each one's ratio to the pure-JS reference. Ratios under
// 1 mean this checkout spends less. BENCH_SAMPLES and BENCH_CALLS shorten a run as for the suite.

const { execFileSync } = require('node:child_process')
const path = require('node:path')

const [other, runsArg] = process.argv.slice(2)
if (!other) {
  console.error('usage: node bench/compare.js <another checkout, built> [runs]')
  process.exit(2)
}
const runs = Number(runsArg ?? 3)

/** The median of the per-sample ratios a/b (samples were taken side by side). */
function ratio(a, b) {
  const rs = a.values.map((x, i) => x / b.values[i]).sort((x, y) => x - y)
  return rs[Math.floor(rs.length / 2)]
}

const median = (xs) => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)]

const FIGURES = { thread: 'JS-thread CPU', process: 'process CPU', wall: 'wall' }

/** Each scenario's figures by contender, from one run's JSON: `trivial[batch]`, `realistic`, `cacheHits`. */
function scenarios(result) {
  const out = Object.entries(result.trivial).map(([batch, figures]) => [`trivial calls, batch ${batch}`, figures])
  out.push(['realistic calls (2 KB, redaction, cache misses), batch 16', result.realistic])
  out.push(['cache hits, batch 16', result.cacheHits])
  return out
}

const rows = new Map()
for (let run = 0; run < runs; run++) {
  process.stderr.write(`compare: run ${run + 1} of ${runs}\n`)
  const out = execFileSync(process.execPath, ['--expose-gc', path.join(__dirname, 'scenarios', 'throughput.js')], {
    encoding: 'utf8',
    env: { ...process.env, BENCH_OTHER: path.resolve(other) },
    stdio: ['ignore', 'pipe', 'inherit'],
    maxBuffer: 64 * 2 ** 20,
  })
  for (const [scenario, f] of scenarios(JSON.parse(out.trim().split('\n').pop()))) {
    for (const [figure, name] of Object.entries(FIGURES)) {
      const key = `| ${scenario} | ${name} |`
      const row = rows.get(key) ?? { change: [], here: [], there: [] }
      row.change.push(ratio(f.toolgate[figure], f.other[figure]))
      row.here.push(ratio(f.toolgate[figure], f.reference[figure]))
      row.there.push(ratio(f.other[figure], f.reference[figure]))
      rows.set(key, row)
    }
  }
}

const x = (r) => `${r.toFixed(3)}×`
console.log(`${runs} runs; medians of the per-sample ratios, each run's median, then their median over the runs.\n`)
console.log(`| scenario | figure | this / ${other} | this / reference | ${other} / reference |`)
console.log('|---|---|---|---|---|')
for (const [key, row] of rows) console.log(`${key} ${x(median(row.change))} (${row.change.map(x).join(', ')}) | ${x(median(row.here))} | ${x(median(row.there))} |`)
