'use strict'
// Per-call overhead of a turn of trivial calls, next to calling the same handlers directly with Promise.all.
// Run by hand after `npm run build`: node bench/overhead.js [samples]. Both contenders run interleaved in one
// process so that their ratio holds on a noisy machine.

const { ToolExecutor } = require('..')

const SAMPLES = Number(process.argv[2] ?? 15)
const BATCHES = [1, 16, 256]
const CALLS_PER_SAMPLE = 20_000

const handler = async (args) => args.n + 1
const schema = { type: 'object', properties: { n: { type: 'integer' } }, required: ['n'] }

const gate = new ToolExecutor()
gate.register({ name: 'inc', readOnly: true, parameters: schema, handler })

function callsOf(size) {
  return Array.from({ length: size }, (_, i) => ({ type: 'function_call', call_id: `c${i}`, name: 'inc', arguments: `{"n":${i}}` }))
}

async function direct(calls) {
  return Promise.all(calls.map((c) => handler(JSON.parse(c.arguments))))
}

async function viaGate(calls) {
  return gate.execute(calls)
}

/** µs of wall time and of process CPU per call, over enough turns to make CALLS_PER_SAMPLE calls. */
async function sample(run, calls) {
  const turns = Math.max(1, Math.floor(CALLS_PER_SAMPLE / calls.length))
  const cpu0 = process.cpuUsage()
  const t0 = process.hrtime.bigint()
  for (let i = 0; i < turns; i++) await run(calls)
  const wallNs = Number(process.hrtime.bigint() - t0)
  const cpu = process.cpuUsage(cpu0)
  const n = turns * calls.length
  return { wall: wallNs / 1e3 / n, cpu: (cpu.user + cpu.system) / n }
}

function median(xs) {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.floor(s.length / 2)]
}

function spread(xs) {
  const s = [...xs].sort((a, b) => a - b)
  return `${s[Math.floor(s.length * 0.1)].toFixed(2)}–${s[Math.ceil(s.length * 0.9) - 1].toFixed(2)}`
}

async function main() {
  const rows = []
  for (const size of BATCHES) {
    const calls = callsOf(size)
    await sample(direct, calls) // warm-up
    await sample(viaGate, calls)
    const d = { wall: [], cpu: [] }
    const g = { wall: [], cpu: [] }
    for (let i = 0; i < SAMPLES; i++) {
      for (const [run, into] of [[direct, d], [viaGate, g]]) {
        const s = await sample(run, calls)
        into.wall.push(s.wall)
        into.cpu.push(s.cpu)
      }
    }
    rows.push({ size, d, g })
  }
  console.log(`node ${process.version}, ${require('os').cpus().length} cores, ${SAMPLES} samples of ${CALLS_PER_SAMPLE} calls; median (10th–90th percentile), µs per call`)
  console.log('| batch | direct wall | toolgate wall | direct CPU | toolgate CPU |')
  console.log('|---|---|---|---|---|')
  for (const { size, d, g } of rows) {
    const cell = (xs) => `${median(xs).toFixed(2)} (${spread(xs)})`
    console.log(`| ${size} | ${cell(d.wall)} | ${cell(g.wall)} | ${cell(d.cpu)} | ${cell(g.cpu)} |`)
  }
}

main()
