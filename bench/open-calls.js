'use strict'
// What watching costs when many calls are open at once: one turn of N calls whose handlers all wait on one promise,
// released once every call has started, watched (`gate.watch`) or not. Per call, so a cost that grows with the
// calls open shows as a figure that grows with N. Run by hand after `npm run build`:
//   node bench/open-calls.js [samples] [package dir]
// With a package dir (a checkout built at another commit), its engine is measured instead of this one.

const path = require('node:path')

const SAMPLES = Number(process.argv[2] ?? 5)
const { ToolExecutor } = require(path.resolve(process.argv[3] ?? path.join(__dirname, '..')))
const SIZES = [1_000, 4_000, 8_000]

async function sample(n, watch) {
  let release
  const gate = new ToolExecutor({ concurrency: n, defaultTimeoutMs: 600_000, dedup: { policy: 'off' } })
  let started = 0
  let allStarted
  const everyStart = new Promise((resolve) => { allStarted = resolve })
  const open = new Promise((resolve) => { release = resolve })
  gate.register({
    name: 'wait',
    readOnly: true,
    handler: async () => {
      if (++started === n) allStarted()
      await open
      return 'ok'
    },
  })
  let heard = 0
  const stop = watch ? gate.watch((batch) => { heard += batch.length }) : undefined
  const calls = Array.from({ length: n }, (_, i) => ({ id: `c${i}`, name: 'wait', arguments: { i } }))
  const t0 = process.hrtime.bigint()
  const results = gate.execute(calls)
  await everyStart
  release()
  await results
  const us = Number(process.hrtime.bigint() - t0) / 1e3 / n
  stop?.()
  await gate.close()
  if (watch && heard < n) throw new Error('the watcher heard less than a call each: the figure would be wrong')
  return us
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]

async function main() {
  console.log(`node ${process.version}; one turn of N calls all open at once; ${SAMPLES} samples; median µs per call`)
  console.log('| calls open | unwatched | watched | watched / unwatched |')
  console.log('|---|---|---|---|')
  for (const n of SIZES) {
    const plain = []
    const watched = []
    await sample(n, false)
    for (let s = 0; s < SAMPLES; s++) {
      plain.push(await sample(n, false))
      watched.push(await sample(n, true))
    }
    const [a, b] = [median(plain), median(watched)]
    console.log(`| ${n.toLocaleString('en')} | ${a.toFixed(2)} | ${b.toFixed(2)} | ${(b / a).toFixed(2)}× |`)
  }
}

main()
