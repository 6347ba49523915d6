'use strict'
// Command tools against what a handler written with child_process does: a command writing 100 MB, collected by the
// engine (bounded) or in JS (every chunk), and the latency from call to result for `true`. Each sample runs in a
// process of its own, so that its peak RSS is its own; contenders alternate sample by sample. Run by hand:
//   node bench/commands.js [samples]

const { execFileSync, spawn } = require('node:child_process')
const { monitorEventLoopDelay } = require('node:perf_hooks')
const { threadCpuNs, median, spread } = require('./lib.js')

const FLOOD = 'yes | head -c 100000000'
const LATENCY_CALLS = 200

/** One call through registerCommand. */
async function viaToolgate(shell) {
  const { ToolExecutor } = require('..')
  const gate = new ToolExecutor()
  gate.registerCommand({ name: 'run', timeoutMs: 120_000, command: () => ({ shell }) })
  const call = async () => {
    const [result] = await gate.execute([{ name: 'run', arguments: {} }])
    if (!result.success) throw new Error(result.error)
    return result
  }
  return { call, close: () => gate.close() }
}

/** One call as a hand-written handler does it: spawn, collect every chunk in JS, join. */
async function viaChildProcess(shell) {
  const call = () => new Promise((resolve, reject) => {
    const child = spawn('/bin/sh', ['-c', shell], { stdio: ['ignore', 'pipe', 'pipe'] })
    const out = []
    const err = []
    child.stdout.on('data', (chunk) => out.push(chunk))
    child.stderr.on('data', (chunk) => err.push(chunk))
    child.on('error', reject)
    child.on('close', (exitCode) => resolve({ stdout: Buffer.concat(out).toString('utf8'), stderr: Buffer.concat(err).toString('utf8'), exitCode }))
  })
  return { call, close: async () => {} }
}

const CONTENDERS = { toolgate: viaToolgate, child_process: viaChildProcess }

/** In a sample's own process: figures for one contender. */
async function sample(name) {
  const contender = await CONTENDERS[name](FLOOD)
  const lag = monitorEventLoopDelay({ resolution: 1 })
  const rssBefore = process.memoryUsage().rss
  lag.enable()
  const [cpu0, wall0] = [threadCpuNs(), performance.now()]
  await contender.call()
  const [cpu1, wall1] = [threadCpuNs(), performance.now()]
  lag.disable()
  const flood = { jsCpuMs: (cpu1 - cpu0) / 1e6, wallMs: wall1 - wall0, maxLagMs: lag.max / 1e6, peakRssGrowthMb: (process.resourceUsage().maxRSS * 1024 - rssBefore) / 2 ** 20 }
  await contender.close()
  const quick = await CONTENDERS[name]('true')
  await quick.call() // warm
  const latencies = []
  for (let i = 0; i < LATENCY_CALLS; i++) {
    const t0 = performance.now()
    await quick.call()
    latencies.push(performance.now() - t0)
  }
  await quick.close()
  return { ...flood, trueLatencyMs: median(latencies) }
}

function main() {
  const samples = Number(process.argv[2] ?? 5)
  const figures = Object.fromEntries(Object.keys(CONTENDERS).map((name) => [name, []]))
  for (let i = 0; i < samples; i++) {
    for (const name of Object.keys(CONTENDERS)) {
      const out = execFileSync(process.execPath, [__filename, '--sample', name], { encoding: 'utf8', maxBuffer: 1 << 20 })
      figures[name].push(JSON.parse(out))
    }
  }
  const keys = ['jsCpuMs', 'wallMs', 'maxLagMs', 'peakRssGrowthMb', 'trueLatencyMs']
  console.log(`command writing 100 MB, and \`true\` (median of ${LATENCY_CALLS} calls per sample); ${samples} samples each: median [p10–p90]`)
  console.log(`| contender | ${keys.join(' | ')} |`)
  console.log(`| --- | ${keys.map(() => '---').join(' | ')} |`)
  for (const [name, rows] of Object.entries(figures)) {
    const cells = keys.map((key) => {
      const xs = rows.map((r) => r[key])
      const [lo, hi] = spread(xs)
      return `${median(xs).toFixed(2)} [${lo.toFixed(2)}–${hi.toFixed(2)}]`
    })
    console.log(`| ${name} | ${cells.join(' | ')} |`)
  }
}

if (process.argv[2] === '--sample') {
  sample(process.argv[3]).then((figures) => process.stdout.write(JSON.stringify(figures)))
} else {
  main()
}
