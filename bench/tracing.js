'use strict'
// What observability costs per call: the same turns of trivial calls with nothing on, with stage timings only,
// with trace events to a listener, with audit records to a JSONL file as well, with OpenTelemetry spans to an
// in-memory exporter, with every turn (or a tenth of them) recorded for replay, watched live (`watch`), and shown on
// the devtools page (served with no page attached, and with a page reading its event stream). Run by hand after `npm run
// build`: node bench/tracing.js [samples] [output bytes]; with output bytes, each handler returns an object of about
// that size (a realistic call) instead of a number. The contenders run interleaved in one process, so their
// differences hold on a noisy machine.

const fs = require('node:fs')
const { spawn } = require('node:child_process')
const os = require('node:os')
const path = require('node:path')
const otel = require('@opentelemetry/api')
const { BasicTracerProvider, SimpleSpanProcessor, InMemorySpanExporter } = require('@opentelemetry/sdk-trace-base')
const { ToolExecutor } = require('..')
const { devtools } = require('../lib/devtools')

const SAMPLES = Number(process.argv[2] ?? 11)
const BATCH = 16
const CALLS_PER_SAMPLE = 16_000
const OUTPUT_BYTES = Number(process.argv[3] ?? 0)
const ROW = { id: 0, title: 'A result row with a title', url: 'https://example.com/a/result', snippet: 'Some words of the page.' }
const output = (n) => (OUTPUT_BYTES === 0 ? n + 1 : { n, rows: Array.from({ length: Math.max(1, Math.round(OUTPUT_BYTES / JSON.stringify(ROW).length)) }, (_, id) => ({ ...ROW, id })) })
let recorded = 0
let heard = 0
let paged = 0

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'toolgate-tracing-'))
const exporter = new InMemorySpanExporter()
const schema = { type: 'object', properties: { n: { type: 'integer' } }, required: ['n'] }
let events = 0

function gateWith(options) {
  const gate = new ToolExecutor({ dedup: { policy: 'off' }, otel: false, ...options })
  gate.register({ name: 'inc', readOnly: true, parameters: schema, handler: async ({ n }) => output(n) })
  return gate
}

const contenders = {
  'nothing on': gateWith({}),
  'stage timings (trace: true)': gateWith({ trace: true }),
  'trace events to onTrace': gateWith({ onTrace: (batch) => { events += batch.length } }),
  'trace events + audit JSONL file': gateWith({ onTrace: (batch) => { events += batch.length }, audit: { file: path.join(dir, 'audit.jsonl'), maxBytes: 64 * 1024 * 1024 } }),
  'OpenTelemetry spans (in-memory exporter)': gateWith({ otel: true }),
  'every turn recorded to a JSONL file': gateWith({ record: { to: path.join(dir, 'turns.jsonl'), maxBytes: 256 * 1024 * 1024 } }),
  'every turn recorded to a function': gateWith({ record: { to: () => { recorded += 1 } } }),
  'a tenth of turns recorded (sample: 0.1)': gateWith({ record: { to: path.join(dir, 'sampled.jsonl'), sample: 0.1 } }),
  'watched live (gate.watch)': watched(gateWith({})),
}

/** A page attached to a devtools server: another process reads its event stream, as a browser would, and says how
 * many bytes it read when told to stop. */
function attachPage(dt) {
  const reader = spawn(process.execPath, ['-e', `
    let bytes = 0
    require('node:http').get(${JSON.stringify(dt.url.replace('/?', '/events?'))}, (res) => {
      res.on('data', (chunk) => { bytes += chunk.length })
      process.stdout.write('attached\\n')
    })
    process.stdin.on('end', () => { process.stdout.write(bytes + '\\n'); process.exit(0) }).resume()
  `], { stdio: ['pipe', 'pipe', 'inherit'] })
  const lines = []
  reader.stdout.setEncoding('utf8').on('data', (text) => lines.push(...text.split('\n').filter(Boolean)))
  const attached = new Promise((resolve) => { const wait = setInterval(() => { if (lines.length) { clearInterval(wait); resolve() } }, 10) })
  return attached.then(() => ({
    detach: () => new Promise((resolve) => {
      reader.on('exit', () => { paged = Number(lines.at(-1)); resolve() })
      reader.stdin.end()
    }),
  }))
}

/** A gate with a watcher that counts what it hears. */
function watched(gate) {
  gate.watch((batch) => { heard += batch.length })
  return gate
}

const calls = Array.from({ length: BATCH }, (_, i) => ({ type: 'function_call', call_id: `c${i}`, name: 'inc', arguments: `{"n":${i}}` }))

async function sample(gate) {
  const turns = CALLS_PER_SAMPLE / BATCH
  const cpu0 = process.cpuUsage()
  const t0 = process.hrtime.bigint()
  for (let i = 0; i < turns; i++) await gate.execute(calls)
  // Trace batches are delivered on a later turn of the event loop: their cost belongs to the sample.
  await new Promise((resolve) => setImmediate(resolve))
  const wall = Number(process.hrtime.bigint() - t0) / 1e3 / CALLS_PER_SAMPLE
  const cpu = process.cpuUsage(cpu0)
  exporter.reset()
  return { wall, cpu: (cpu.user + cpu.system) / CALLS_PER_SAMPLE }
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]

async function main() {
  otel.trace.setGlobalTracerProvider(new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }))
  const served = [await devtools(contenders['devtools serving, no page attached'] = gateWith({}))]
  served.push(await devtools(contenders['devtools with a page attached'] = gateWith({})))
  const page = await attachPage(served[1])
  const results = Object.fromEntries(Object.keys(contenders).map((k) => [k, { wall: [], cpu: [] }]))
  for (const gate of Object.values(contenders)) await sample(gate) // warm-up
  for (let s = 0; s < SAMPLES; s++) {
    for (const [name, gate] of Object.entries(contenders)) {
      const r = await sample(gate)
      results[name].wall.push(r.wall)
      results[name].cpu.push(r.cpu)
    }
  }
  await page.detach()
  for (const dt of served) await dt.close()
  for (const gate of Object.values(contenders)) await gate.close()
  fs.rmSync(dir, { recursive: true, force: true })
  const base = median(results['nothing on'].wall)
  console.log(`node ${process.version}; turns of ${BATCH} ${OUTPUT_BYTES === 0 ? 'trivial calls' : `calls returning ${OUTPUT_BYTES} bytes of JSON`}, ${SAMPLES} samples of ${CALLS_PER_SAMPLE} calls; median µs per call`)
  console.log('| observability | wall µs per call | process CPU µs per call | added wall µs per call |')
  console.log('|---|---|---|---|')
  for (const [name, r] of Object.entries(results)) {
    const wall = median(r.wall)
    console.log(`| ${name} | ${wall.toFixed(2)} | ${median(r.cpu).toFixed(2)} | ${(wall - base).toFixed(2)} |`)
  }
  if (events === 0 || recorded === 0 || heard === 0 || paged === 0) throw new Error('no trace events, recorded turns, live events or page messages were delivered: the figures would be wrong')
}

main()
