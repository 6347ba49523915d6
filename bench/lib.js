'use strict'
// What every scenario of the suite shares: the contenders behind one interface, the figures taken per sample, and
// the statistics. A scenario runs its contenders interleaved, sample by sample, in one process, so that their
// ratios hold on a noisy machine.

const fs = require('node:fs')
const path = require('node:path')
const { monitorEventLoopDelay } = require('node:perf_hooks')
const { ToolExecutor } = require('..')
const { createReference } = require('./contenders/reference')
const { createAiSdk } = require('./contenders/aisdk')

// ── Figures ───────────────────────────────────────────────────────────────────────────────────────────────────────

/** CPU time of the calling thread in ns: the JS thread's own share, apart from tokio's and the GC helpers'. */
function threadCpuNs() {
  // Linux gives the current thread's run time in ns; elsewhere only the whole process is known.
  try {
    return Number(fs.readFileSync('/proc/thread-self/schedstat', 'latin1').split(' ')[0])
  } catch {
    return NaN
  }
}

/** Runs `turns` (an array of call batches) through `execute`, one after another, yielding to the event loop
 * between turns as a server does between requests; returns the figures per call. */
async function sampleTurns(execute, turns) {
  let calls = 0
  for (const t of turns) calls += t.length
  const lag = monitorEventLoopDelay({ resolution: 1 })
  await new Promise(setImmediate)
  lag.enable()
  const thread0 = threadCpuNs()
  const cpu0 = process.cpuUsage()
  const t0 = process.hrtime.bigint()
  for (const turn of turns) {
    await execute(turn)
    await new Promise(setImmediate)
  }
  const wallNs = Number(process.hrtime.bigint() - t0)
  const cpu = process.cpuUsage(cpu0)
  const threadNs = threadCpuNs() - thread0
  lag.disable()
  return {
    wall: wallNs / 1e3 / calls,
    thread: threadNs / 1e3 / calls,
    process: (cpu.user + cpu.system) / calls,
    lagMax: lag.max / 1e6,
    rss: process.memoryUsage.rss() / 2 ** 20,
  }
}

// ── Statistics ────────────────────────────────────────────────────────────────────────────────────────────────────

const sorted = (xs) => [...xs].sort((a, b) => a - b)
const median = (xs) => sorted(xs)[Math.floor(xs.length / 2)]
/** The 10th and 90th percentiles: the spread of the samples without their outliers. */
const spread = (xs) => {
  const s = sorted(xs)
  return [s[Math.floor((s.length - 1) * 0.1)], s[Math.ceil((s.length - 1) * 0.9)]]
}
const summarize = (xs) => ({ median: median(xs), spread: spread(xs), values: xs })

/**
 * Runs every contender `samples` times, interleaved, after one warm-up each. `makeTurns()` builds a sample's calls
 * (before the clock starts); returns per contender the summary of each figure.
 */
async function compare(contenders, makeTurns, samples) {
  const figures = new Map(contenders.map((c) => [c.name, {}]))
  for (const c of contenders) await sampleTurns(c.execute, makeTurns(c))
  for (let s = 0; s < samples; s++) {
    for (const c of contenders) {
      const turns = makeTurns(c)
      if (global.gc) global.gc()
      const one = await sampleTurns(c.execute, turns)
      const into = figures.get(c.name)
      for (const [k, v] of Object.entries(one)) (into[k] ??= []).push(v)
    }
  }
  const out = {}
  for (const [name, f] of figures) out[name] = Object.fromEntries(Object.entries(f).map(([k, xs]) => [k, summarize(xs)]))
  return out
}

// ── Contenders ────────────────────────────────────────────────────────────────────────────────────────────────────

/**
 * The same tools in every contender. A tool: `{ name, description, parameters, zodSchema?, readOnly, cache?,
 * handler }`. Options: `{ redact, cache }` as the scenario needs them; each contender gets the same features.
 */
async function contenders(tools, { aiSdk = true, gateOptions = {}, referenceOptions = {} } = {}) {
  const list = []

  const handlers = new Map(tools.map((t) => [t.name, t.handler]))
  list.push({
    name: 'floor',
    label: 'floor (handlers called directly, Promise.all)',
    execute: (calls) => Promise.all(calls.map((c) => handlers.get(c.name)(JSON.parse(c.arguments)))),
    close: async () => {},
  })

  const reference = await createReference(referenceOptions)
  for (const t of tools) reference.register(spec(t))
  list.push({ name: 'reference', label: 'pure-JS reference pipeline', execute: (calls) => reference.execute(calls), close: () => reference.close() })

  if (aiSdk) {
    const sdk = createAiSdk()
    for (const t of tools) sdk.register({ name: t.name, description: t.description, parameters: t.parameters, zodSchema: t.zodSchema, handler: t.handler })
    list.push({ name: 'aisdk', label: 'AI SDK 5 generateText (mock model)', execute: (calls) => sdk.execute(calls), close: async () => {} })
  }

  const gate = new ToolExecutor(gateOptions)
  for (const t of tools) gate.register(spec(t))
  list.push({ name: 'toolgate', label: 'toolgate', execute: (calls) => gate.execute(calls), close: () => gate.close() })

  // BENCH_OTHER names another checkout, built: its executor runs beside this one, interleaved in the same process,
  // so that a change is measured against the code it changes (bench/compare.js).
  if (process.env.BENCH_OTHER) {
    const { ToolExecutor: Other } = require(path.resolve(process.env.BENCH_OTHER))
    const other = new Other(gateOptions)
    for (const t of tools) other.register(spec(t))
    list.push({ name: 'other', label: `toolgate at ${process.env.BENCH_OTHER}`, execute: (calls) => other.execute(calls), close: () => other.close() })
  }
  return list
}

function spec({ name, description, parameters, readOnly, idempotent, cache, handler }) {
  return { name, description, parameters, readOnly, idempotent, ...(cache ? { cache } : {}), handler }
}

/** Calls in the OpenAI Responses shape, the one the model in a real turn emits. */
function functionCalls(name, argsList, prefix = 'c') {
  return argsList.map((args, i) => ({ type: 'function_call', call_id: `${prefix}${i}`, name, arguments: JSON.stringify(args) }))
}

// 2 KB pages of a fetched document: prose, a JSON fragment and paths; one page in four carries a live-looking
// secret, so that redaction has work to do as well as text to scan.
const PAGES = Array.from({ length: 64 }, (_, p) => page(p))
function page(p) {
  const lines = [`# Page ${p} of the deployment guide`]
  if (p % 4 === 0) lines.push(`export GITHUB_TOKEN=ghp_${'Zq4R8sT2vW6xY1bN3mK5pL7jH9gF0dC2aE4'.slice(0, 35)}${p % 10}`)
  for (let i = 0; lines.join('\n').length < 2000; i++) {
    lines.push(
      i % 3 === 0
        ? `Step ${i}: run the migration in /srv/app/releases/${p}/db and check the logs for errors before you continue.`
        : i % 3 === 1
          ? `{"step":${i},"service":"api-${p}","replicas":${(i % 5) + 1},"healthy":true,"region":"eu-west-1"}`
          : `The service answers on port 80${i % 10}; requests over 30 s are cut, and a retry waits 2 s (id ${p}-${i}).`,
    )
  }
  return lines.join('\n').slice(0, 2048)
}

/** A read-only, cached tool that returns a page of `PAGES`: what the realistic scenarios call, each with its own
 * name, description and handler. */
const pageTool = {
  parameters: {
    type: 'object',
    properties: { doc: { type: 'string' }, page: { type: 'integer', minimum: 0 } },
    required: ['doc', 'page'],
    additionalProperties: false,
  },
  readOnly: true,
  idempotent: true,
  cache: { ttlMs: 600_000 },
}

/** One small search tool, declared both ways, for the scenarios that compare how a tool is declared or run. */
const searchTool = {
  parameters: {
    type: 'object',
    properties: { query: { type: 'string', minLength: 1 }, limit: { type: 'integer', minimum: 1, maximum: 50 }, sort: { enum: ['new', 'top'] } },
    required: ['query', 'limit', 'sort'],
  },
  zodSchema: () => {
    const { z } = require('zod')
    return z.object({ query: z.string().min(1), limit: z.int().min(1).max(50), sort: z.enum(['new', 'top']) })
  },
  handler: async ({ query, limit }) => `${query}:${limit}`,
}

module.exports = { PAGES, compare, pageTool, contenders, functionCalls, sampleTurns, searchTool, summarize, median, spread, threadCpuNs }
