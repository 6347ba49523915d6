'use strict'
// What observability costs per call: the same turns of trivial calls with nothing on, with stage timings only,
// with trace events to a listener, with audit records to a JSONL file as well, and with OpenTelemetry spans to an
// in-memory exporter. Run by hand after `npm run build`: node bench/tracing.js [samples]. The contenders run
// interleaved in one process, so their differences hold on a noisy machine.

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const otel = require('@opentelemetry/api')
const { BasicTracerProvider, SimpleSpanProcessor, InMemorySpanExporter } = require('@opentelemetry/sdk-trace-base')
const { ToolExecutor } = require('..')

const SAMPLES = Number(process.argv[2] ?? 11)
const BATCH = 16
const CALLS_PER_SAMPLE = 16_000

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'toolgate-tracing-'))
const exporter = new InMemorySpanExporter()
const schema = { type: 'object', properties: { n: { type: 'integer' } }, required: ['n'] }
let events = 0

function gateWith(options) {
  const gate = new ToolExecutor({ dedup: { policy: 'off' }, otel: false, ...options })
  gate.register({ name: 'inc', readOnly: true, parameters: schema, handler: async ({ n }) => n + 1 })
  return gate
}

const contenders = {
  'nothing on': gateWith({}),
  'stage timings (trace: true)': gateWith({ trace: true }),
  'trace events to onTrace': gateWith({ onTrace: (batch) => { events += batch.length } }),
  'trace events + audit JSONL file': gateWith({ onTrace: (batch) => { events += batch.length }, audit: { file: path.join(dir, 'audit.jsonl'), maxBytes: 64 * 1024 * 1024 } }),
  'OpenTelemetry spans (in-memory exporter)': gateWith({ otel: true }),
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
  const results = Object.fromEntries(Object.keys(contenders).map((k) => [k, { wall: [], cpu: [] }]))
  for (const gate of Object.values(contenders)) await sample(gate) // warm-up
  for (let s = 0; s < SAMPLES; s++) {
    for (const [name, gate] of Object.entries(contenders)) {
      const r = await sample(gate)
      results[name].wall.push(r.wall)
      results[name].cpu.push(r.cpu)
    }
  }
  for (const gate of Object.values(contenders)) await gate.close()
  fs.rmSync(dir, { recursive: true, force: true })
  const base = median(results['nothing on'].wall)
  console.log(`node ${process.version}; turns of ${BATCH} trivial calls, ${SAMPLES} samples of ${CALLS_PER_SAMPLE} calls; median µs per call`)
  console.log('| observability | wall µs per call | process CPU µs per call | added wall µs per call |')
  console.log('|---|---|---|---|')
  for (const [name, r] of Object.entries(results)) {
    const wall = median(r.wall)
    console.log(`| ${name} | ${wall.toFixed(2)} | ${median(r.cpu).toFixed(2)} | ${(wall - base).toFixed(2)} |`)
  }
  if (events === 0) throw new Error('no trace events were delivered: the figures would be wrong')
}

main()
