'use strict'
// Shared helpers of the Node test suite (not a test file itself: `node --test` only picks up *.test.js).

const assert = require('node:assert/strict')
const path = require('node:path')
const { spawn } = require('node:child_process')
const { ToolExecutor } = require('..')

/** The package directory, for code that runs where `require('..')` does not resolve (workers). */
const PACKAGE_DIR = path.resolve(__dirname, '..')

const sleep = (ms, value) => new Promise((resolve) => setTimeout(resolve, ms, value))

/** A promise that never settles and holds nothing in the event loop. */
const never = () => new Promise(() => {})

/** A promise that rejects with the signal's reason once it is aborted: a handler that honours its signal. */
const untilAborted = (signal) => new Promise((_resolve, reject) => {
  if (signal.aborted) reject(signal.reason)
  else signal.addEventListener('abort', () => reject(signal.reason), { once: true })
})

/** Collects process warnings (toolgate turns a listener's exception into one) until `stop()`. */
function collectWarnings() {
  const warnings = []
  const onWarning = (warning) => warnings.push(warning)
  process.on('warning', onWarning)
  return { warnings, stop: () => process.off('warning', onWarning) }
}

/** mulberry32: a small seeded generator, so that a failing run can be replayed. */
function generator(seed) {
  let a = seed >>> 0
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
  return {
    next,
    int: (n) => Math.floor(next() * n),
    pick: (items) => items[Math.floor(next() * items.length)],
    chance: (p) => next() < p,
  }
}

/** A promise with its resolve/reject exposed. */
function deferred() {
  let resolve
  let reject
  const promise = new Promise((res, rej) => {
    resolve = res
    reject = rej
  })
  return { promise, resolve, reject }
}

/**
 * An executor with the given tools registered. Each tool may carry its handler or default to one returning 'ok'.
 * Returns the executor and `calls`, a per-tool invocation counter (to prove refused calls never reach a handler).
 */
function gateWith(tools, options = {}) {
  const gate = new ToolExecutor(options)
  const calls = {}
  for (const spec of tools) {
    const handler = spec.handler ?? (() => 'ok')
    calls[spec.name] = 0
    gate.register({
      ...spec,
      handler: (args, ctx) => {
        calls[spec.name] += 1
        return handler(args, ctx)
      },
    })
  }
  return { gate, calls }
}

/** A result's trace: one "station:outcome" string per station it met, in order. */
const marks = (result) => result.metadata.stages

/** The stations a result passed, in order. */
const stations = (result) => result.metadata.stages.map((mark) => mark.split(':')[0])

/** The stations every call that reached its handler passes. */
const ADMITTED = ['lookup:found', 'parse:ok', 'validate:ok', 'permission:allowed']

/** A failed result: its kind, the model-facing output built from the error, and each fragment in the error. */
function assertFailure(result, kind, ...fragments) {
  assert.equal(result.success, false, `expected a failure, got ${JSON.stringify(result)}`)
  assert.equal(result.errorKind, kind, `expected ${kind}: ${result.error}`)
  assert.equal(typeof result.error, 'string')
  assert.equal(result.output, `Error (${kind}): ${result.error}`)
  for (const fragment of fragments) {
    if (fragment instanceof RegExp) assert.match(result.error, fragment)
    else assert.ok(result.error.includes(fragment), `expected ${JSON.stringify(fragment)} in ${JSON.stringify(result.error)}`)
  }
}

/** A successful result with exactly this output. */
function assertSuccess(result, output) {
  assert.equal(result.success, true, `expected success, got ${JSON.stringify(result)}`)
  assert.equal(result.errorKind, undefined)
  assert.equal(result.error, undefined)
  if (output !== undefined) assert.equal(result.output, output)
}

/**
 * Runs `script` in a child Node process (cwd = this folder, so `require('..')` is the package; `env` on top of this
 * process's environment) and resolves when it exits. A child still alive after `killAfterMs` is killed and reported
 * with `timedOut: true`: the callers assert it is false, so a child that cannot exit by itself fails its test
 * instead of hanging the suite.
 */
function runChild(script, { killAfterMs = 20_000, env = {} } = {}) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['-e', script], { cwd: __dirname, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } })
    let stdout = ''
    let stderr = ''
    let timedOut = false
    child.stdout.setEncoding('utf8').on('data', (d) => { stdout += d })
    child.stderr.setEncoding('utf8').on('data', (d) => { stderr += d })
    const timer = setTimeout(() => {
      timedOut = true
      child.kill('SIGKILL')
    }, killAfterMs)
    child.on('error', reject)
    child.on('close', (code, signal) => {
      clearTimeout(timer)
      resolve({ code, signal, stdout, stderr, timedOut })
    })
  })
}

/** The last line a child printed, parsed as JSON (children print their results as one JSON line). */
function lastJsonLine(stdout) {
  const lines = stdout.trim().split('\n').filter(Boolean)
  assert.ok(lines.length > 0, 'the child printed nothing')
  return JSON.parse(lines[lines.length - 1])
}

/** Records start/end events and how many handlers ran at once, for scheduling assertions. */
function recorder() {
  const events = []
  let running = 0
  let maxRunning = 0
  return {
    events,
    get maxRunning() {
      return maxRunning
    },
    /** A handler that records `start:<id>`, waits `ms` (or `args.ms`), records `end:<id>` and returns the id. */
    handler(ms = 30) {
      return async (args) => {
        running += 1
        maxRunning = Math.max(maxRunning, running)
        events.push(`start:${args.id}`)
        await sleep(args.ms ?? ms)
        events.push(`end:${args.id}`)
        running -= 1
        return args.id
      }
    },
    index: (event) => events.indexOf(event),
  }
}

/** A tool's (or the total's) `stats()` counters: the ones named, every other one zero. */
function counts(named) {
  return {
    retries: 0, timeouts: 0, idleTimeouts: 0, lateSettlements: 0,
    cacheHits: 0, cacheMisses: 0, sharedFlights: 0, duplicates: 0, rateLimited: 0,
    ...named,
  }
}

const COUNTER_KEYS = Object.keys(counts())

/** The counters of `stats()` (or of one tool, or of its `tools` map), without the metrics beside them: what the
 * counting tests compare. Tools whose counters are all zero are left out of a map. */
function counterView(stats) {
  const pick = (c) => Object.fromEntries(COUNTER_KEYS.map((k) => [k, c[k]]))
  const counted = (c) => COUNTER_KEYS.some((k) => c[k] !== 0)
  const each = (tools) => Object.fromEntries(Object.entries(tools).filter(([, c]) => counted(c)).map(([name, c]) => [name, pick(c)]))
  if ('total' in stats && 'tools' in stats) return { total: pick(stats.total), tools: each(stats.tools) }
  if ('retries' in stats) return pick(stats)
  return each(stats)
}

/** A gate with one read-only tool, `get_weather({ city, days? })`, answering `sunny in <city>`. */
function weatherGate(options = {}) {
  const gate = new ToolExecutor(options)
  gate.register({
    name: 'get_weather',
    readOnly: true,
    parameters: { type: 'object', properties: { city: { type: 'string' }, days: { type: 'integer' } }, required: ['city'] },
    handler: ({ city }) => `sunny in ${city}`,
  })
  return gate
}

/** Each result's errorKind, or 'ok' for a success: a turn's outcome at a glance. */
const kinds = (results) => results.map((r) => r.errorKind ?? 'ok')

module.exports = {
  generator,
  PACKAGE_DIR,
  counts,
  counterView,
  kinds,
  ADMITTED,
  sleep,
  never,
  untilAborted,
  collectWarnings,
  deferred,
  gateWith,
  marks,
  stations,
  assertFailure,
  assertSuccess,
  runChild,
  lastJsonLine,
  recorder,
  weatherGate,
}
