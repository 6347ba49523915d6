'use strict'
// One 10 MB tool output, redacted, cut and spilled to a file, toolgate next to the pure-JS reference pipeline:
// the time until the result is in hand, the event loop's longest stall meanwhile, and the JS thread's CPU.
// Prints one JSON line.

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { ToolExecutor } = require('../..')
const { createReference } = require('../contenders/reference')
const { summarize, threadCpuNs } = require('../lib')

const SAMPLES = Number(process.env.BENCH_SAMPLES ?? 9)
const MAX_OUTPUT_CHARS = 30_000
const PREVIEW_CHARS = 2_000

// 10 MB of log lines, JSON and prose with some UTF-8, and one secret every ~40 KB (about 275 in all).
function buildOutput() {
  const lines = []
  let size = 0
  for (let i = 0; size < 10 * 1024 * 1024; i++) {
    let line
    if (i % 400 === 0) line = `${i} deploy: export GITHUB_TOKEN=ghp_${rand(36)} # rotate weekly`
    else if (i % 3 === 0) line = `{"ts":"2026-11-29T12:00:${String(i % 60).padStart(2, '0')}Z","level":"info","msg":"request ${i} served","user":"user-${i % 97}","ms":${i % 250}}`
    else if (i % 3 === 1) line = `${i} commit 3f786850e387550fdab836ed7e6dc881de23001b id 123e4567-e89b-12d3-a456-426614174000 ok`
    else line = `${i} 日志行：用户请求已处理 — the request was handled, café ☕ status=200`
    lines.push(line)
    size += Buffer.byteLength(line) + 1
  }
  return lines.join('\n')
}

function rand(n) {
  const abc = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789'
  let s = ''
  for (let i = 0; i < n; i++) s += abc[Math.floor(Math.random() * abc.length)]
  return s
}

/** The event loop's longest stall from now until the returned function is called, in ms. */
function stallMeter() {
  let last = performance.now()
  let worst = 0
  const timer = setInterval(() => {
    const now = performance.now()
    worst = Math.max(worst, now - last)
    last = now
  }, 1)
  return () => {
    clearInterval(timer)
    return Math.max(worst, performance.now() - last)
  }
}

async function main() {
  const output = buildOutput()
  const secrets = (output.match(/ghp_/g) ?? []).length
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'toolgate-bench-'))
  const options = { maxOutputChars: MAX_OUTPUT_CHARS, previewChars: PREVIEW_CHARS }
  const gate = new ToolExecutor({ ...options, artifacts: { dir: path.join(dir, 'toolgate') } })
  const reference = await createReference(options)
  const tool = { name: 'big', readOnly: true, parameters: { type: 'object', properties: {} }, handler: async () => output }
  gate.register(tool)
  reference.register(tool)
  const call = [{ type: 'function_call', call_id: 'c1', name: 'big', arguments: '{}' }]
  const contenders = [
    ['toolgate', (c) => gate.execute(c)],
    ['reference', (c) => reference.execute(c)],
  ]
  for (const [name, execute] of contenders) {
    const [r] = await execute(call)
    const hidden = !r.output.includes('ghp_') && r.truncated
    if (!hidden) throw new Error(`${name}: the output was not redacted and cut`)
  }
  const figures = Object.fromEntries(contenders.map(([name]) => [name, { total: [], stall: [], thread: [] }]))
  for (let s = 0; s < SAMPLES; s++) {
    for (const [name, execute] of contenders) {
      global.gc?.()
      await new Promise((r) => setTimeout(r, 5))
      const stop = stallMeter()
      const thread0 = threadCpuNs()
      const t0 = performance.now()
      await execute(call)
      figures[name].total.push(performance.now() - t0)
      figures[name].thread.push((threadCpuNs() - thread0) / 1e6)
      figures[name].stall.push(stop())
    }
  }
  await gate.close()
  await reference.close()
  fs.rmSync(dir, { recursive: true, force: true })
  const out = { bytes: Buffer.byteLength(output), secrets }
  for (const [name, f] of Object.entries(figures)) out[name] = Object.fromEntries(Object.entries(f).map(([k, xs]) => [k, summarize(xs)]))
  console.log(JSON.stringify(out))
}

main().catch((err) => {
  console.error(err)
  process.exit(1)
})
