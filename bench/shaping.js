'use strict'
// Shaping a 10 MB tool output (redact + truncate + spill to a file), toolgate next to the same work in plain JS,
// and how long the event loop is blocked while each runs. Run by hand after `npm run build`:
// node bench/shaping.js [samples]. The contenders run interleaved in one process.

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { ToolExecutor } = require('..')

const SAMPLES = Number(process.argv[2] ?? 9)
const MAX_OUTPUT_CHARS = 30_000
const PREVIEW_CHARS = 2_000

// 10 MB of log lines, JSON and prose with some UTF-8, and one secret every ~40 KB (about 250 in all).
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

// ── The pure-JS reference: what a careful user would write, with the same rule families ─────────────────────────
const JS_RULES = [
  ['aws-access-key-id', String.raw`\b(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}\b`],
  ['github-token', String.raw`\b(?:gh[pousr]_[A-Za-z0-9]{36}|github_pat_[A-Za-z0-9_]{82})\b`],
  ['gitlab-token', String.raw`\bgl(?:pat|ptt|dt|rt)-[A-Za-z0-9_-]{20,}`],
  ['openai-api-key', String.raw`\bsk-(?:proj|svcacct|admin)-[A-Za-z0-9_-]{20,}|\bsk-[A-Za-z0-9]{48}\b`],
  ['anthropic-api-key', String.raw`\bsk-ant-(?:api|admin)\d\d-[A-Za-z0-9_-]{80,}`],
  ['slack-token', String.raw`\bxox[baprse]-[A-Za-z0-9-]{10,}`],
  ['slack-webhook', String.raw`https://hooks\.slack\.com/services/T[A-Z0-9]+/B[A-Z0-9]+/[A-Za-z0-9]+`],
  ['stripe-key', String.raw`\b[sr]k_(?:live|test)_[A-Za-z0-9]{24,}\b`],
  ['google-api-key', String.raw`\bAIza[A-Za-z0-9_-]{35}\b`],
  ['jwt', String.raw`\beyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{10,}`],
  ['private-key', String.raw`-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----`],
  ['bearer-token', String.raw`\bBearer\s+[A-Za-z0-9._~+/=-]{16,}`],
  ['secret-assignment', String.raw`\b(?:password|passwd|secret|api_?key|access_token|auth_token|client_secret)\s*[:=]\s*["']?[^\s"']{8,}`],
]
const JS_COMBINED = new RegExp(JS_RULES.map(([, p]) => `(${p})`).join('|'), 'g')

function shapeInJs(output, dir, n) {
  const counts = {}
  const redacted = output.replace(JS_COMBINED, (...m) => {
    const rule = JS_RULES[m.slice(1, 1 + JS_RULES.length).findIndex((g) => g !== undefined)][0]
    counts[rule] = (counts[rule] ?? 0) + 1
    return `[REDACTED:${rule}]`
  })
  let chars = 0
  for (const _ of redacted) chars++ // code points, as the limit counts them
  if (chars <= MAX_OUTPUT_CHARS) return { output: redacted, counts }
  const file = path.join(dir, `big-${n}.txt`)
  fs.writeFileSync(file, redacted, { mode: 0o600 })
  const preview = Array.from(redacted.slice(0, PREVIEW_CHARS * 2)).slice(0, PREVIEW_CHARS).join('')
  return {
    output: `[Output too long for the context: ${chars} characters. The whole output is saved in ${file}.]\n${preview}`,
    counts,
  }
}

// ── The event loop's longest stall while a contender runs ────────────────────────────────────────────────────────
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
    worst = Math.max(worst, performance.now() - last)
    return worst
  }
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]
const tick = () => new Promise((resolve) => setTimeout(resolve, 5))

async function main() {
  const output = buildOutput()
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'toolgate-bench-'))
  const gate = new ToolExecutor({ maxOutputChars: MAX_OUTPUT_CHARS, previewChars: PREVIEW_CHARS, artifacts: { dir: path.join(dir, 'tg') } })
  gate.register({ name: 'big', readOnly: true, handler: () => output })

  const [check] = await gate.execute([{ name: 'big' }])
  const jsCheck = shapeInJs(output, dir, 'check')
  const secrets = (output.match(/ghp_/g) ?? []).length
  if (check.metadata.redactions['github-token'] !== secrets || jsCheck.counts['github-token'] !== secrets) {
    throw new Error(`redaction counts differ: ${JSON.stringify(check.metadata.redactions)} / ${JSON.stringify(jsCheck.counts)} / ${secrets}`)
  }

  const wall = { toolgate: [], js: [] }
  const stall = { toolgate: [], js: [] }
  for (let s = 0; s < SAMPLES; s++) {
    await tick()
    let stop = stallMeter()
    let t0 = performance.now()
    await gate.execute([{ name: 'big' }])
    wall.toolgate.push(performance.now() - t0)
    stall.toolgate.push(stop())
    await tick()
    stop = stallMeter()
    t0 = performance.now()
    await new Promise((resolve) => setImmediate(resolve)) // let the meter arm, as toolgate's turn does
    shapeInJs(output, dir, s)
    wall.js.push(performance.now() - t0)
    stall.js.push(stop())
  }
  await gate.close()
  fs.rmSync(dir, { recursive: true, force: true })

  const mb = (Buffer.byteLength(output) / 1024 / 1024).toFixed(1)
  console.log(`node ${process.version}; a ${mb} MiB output with ${secrets} secrets; ${SAMPLES} samples, median (min–max) ms`)
  console.log('| contender | total ms | longest event-loop stall ms |')
  console.log('|---|---|---|')
  const fmt = (xs) => `${median(xs).toFixed(1)} (${Math.min(...xs).toFixed(1)}–${Math.max(...xs).toFixed(1)})`
  console.log(`| toolgate (redact, cut, spill on a worker thread) | ${fmt(wall.toolgate)} | ${fmt(stall.toolgate)} |`)
  console.log(`| plain JS (one combined RegExp, writeFileSync) | ${fmt(wall.js)} | ${fmt(stall.js)} |`)
}

main()
