// @ts-check
'use strict'
// toolgate/devtools: a local page that watches gates' turns live, answers their approvals, shows their health and
// replays a recording against them. A plain Node HTTP server: the page, its script and styles ship in this folder;
// nothing is fetched from any network. Nothing is watched until a page is attached, and what is kept is capped.

const crypto = require('node:crypto')
const fs = require('node:fs')
const http = require('node:http')
const path = require('node:path')
const state = require('./state.js')

const TWIN = Symbol.for('toolgate.twin')
/** Events are sent to pages at most this often: a busy gate costs the page one message per interval. */
const FLUSH_MS = 50
/** Events waiting to be sent past which pages are told to reconnect for a snapshot (a burst they cannot follow). */
const MAX_QUEUED_EVENTS = 20_000
/** A page that reads slower than this many bytes behind is dropped; its browser reconnects and starts over. */
const MAX_BEHIND_BYTES = 8 * 1024 * 1024
const MAX_APPROVAL_BYTES = 256 * 1024
const MAX_RECORDING_BYTES = 32 * 1024 * 1024
/** Entries of each list `inspect()` gives the health view. */
const HEALTH_ENTRIES = 20
/** How long watching goes on after the last page went (a page reloaded comes back within it). */
const RELOAD_GRACE_MS = 2_000
const ASSETS = {
  '/page.js': ['page.js', 'text/javascript; charset=utf-8'],
  '/page.css': ['page.css', 'text/css; charset=utf-8'],
  '/state.js': ['state.js', 'text/javascript; charset=utf-8'],
  '/legend.js': ['../legend.js', 'text/javascript; charset=utf-8'],
}
const LOOPBACK = new Set(['127.0.0.1', 'localhost', '::1'])

function readOptions(options) {
  if (options === null || typeof options !== 'object') throw new TypeError('devtools(gate, options): options must be an object')
  const { port = 0, host = '127.0.0.1', approvals = false, keepTurns = 200, ...rest } = options
  const unknown = Object.keys(rest)
  if (unknown.length > 0) throw new TypeError(`devtools(gate, options): unknown option ${unknown.map((k) => `"${k}"`).join(', ')} (port, host, approvals, keepTurns)`)
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new TypeError('devtools(gate, { port }): port must be a whole number from 0 (any free port) to 65535')
  if (typeof host !== 'string' || host === '') throw new TypeError("devtools(gate, { host }): host must be an address such as '127.0.0.1'")
  if (typeof approvals !== 'boolean') throw new TypeError('devtools(gate, { approvals }): approvals must be true or false')
  if (!Number.isInteger(keepTurns) || keepTurns < 1) throw new TypeError('devtools(gate, { keepTurns }): keepTurns must be a whole number of at least 1')
  return { port, host, approvals, keepTurns }
}

function readGates(gates) {
  const list = Array.isArray(gates) ? gates : [gates]
  const methods = ['watch', 'stats', 'healthReport', 'inspect', 'pendingHandlers', TWIN]
  if (list.length === 0 || list.some((gate) => methods.some((method) => typeof gate?.[method] !== 'function'))) {
    throw new TypeError('devtools(gate | gates): give a ToolExecutor of this toolgate, or an array of them')
  }
  if (new Set(list).size !== list.length) throw new TypeError('devtools(gates): the same gate is given twice')
  return list
}

/** Equal strings, compared in a time that does not depend on where they differ. */
function sameSecret(given, token) {
  const a = Buffer.from(String(given ?? ''))
  const b = Buffer.from(token)
  return a.length === b.length && crypto.timingSafeEqual(a, b)
}

/** The Host header names this server: a loopback name or the address it listens on, with its port. A name a DNS
 * record could point here (rebinding) is refused; an IP literal cannot be rebound. */
function hostAllowed(header, listening, port) {
  if (typeof header !== 'string') return false
  const match = /^(\[[0-9a-fA-F:.]+\]|[^:[\]]+)(?::(\d+))?$/.exec(header)
  // A browser leaves out the default port.
  if (!match || Number(match[2] ?? 80) !== port) return false
  const name = match[1].replace(/^\[|\]$/g, '').toLowerCase()
  return LOOPBACK.has(name) || name === listening.toLowerCase() || /^[\d.]+$/.test(name) || name.includes(':')
}

function send(res, status, body, type = 'text/plain; charset=utf-8', headers = {}) {
  res.writeHead(status, { 'content-type': type, 'cache-control': 'no-store', 'x-content-type-options': 'nosniff', 'referrer-policy': 'no-referrer', ...headers })
  res.end(body)
}

const sendJson = (res, status, value) => send(res, status, JSON.stringify(value), 'application/json; charset=utf-8')

/** A request's body as text, up to `max` bytes (past it, undefined and the request is answered 413). */
function bodyOf(req, res, max) {
  return new Promise((resolve) => {
    const chunks = []
    let size = 0
    req.on('data', (chunk) => {
      size += chunk.length
      if (size > max) {
        if (!res.headersSent) {
          // Answered now; what the client still sends is read and dropped, so that it gets the answer.
          send(res, 413, `the body is larger than ${max} bytes`)
          chunks.length = 0
          resolve(undefined)
        }
      } else chunks.push(chunk)
    })
    req.on('end', () => resolve(size > max ? undefined : Buffer.concat(chunks).toString('utf8')))
    req.on('error', () => resolve(undefined))
  })
}

/**
 * Serves the devtools page for `gates` until `close()`. Resolves once it listens, to `{ url, close }`: open `url` (it
 * carries the page's token) in a browser.
 */
async function devtools(gates, options = {}) {
  const list = readGates(gates)
  const { port, host, approvals, keepTurns } = readOptions(options)
  const token = crypto.randomBytes(24).toString('base64url')
  const kept = state.create({ keepTurns })
  /** Pages attached, by their response stream. */
  const pages = new Set()
  /** Compacted events not sent yet, as [gate, events] batches. */
  let queued = []
  let queuedCount = 0
  let flushTimer
  let stops = []
  let stopTimer
  /** Approvals waiting for the page, by id. */
  const pending = new Map()
  let nextApproval = 1
  const html = fs.readFileSync(path.join(__dirname, 'page.html'), 'utf8')

  const broadcast = (message) => {
    const data = `data: ${JSON.stringify(message)}\n\n`
    for (const res of pages) {
      // A page that does not keep up is let go: its browser reconnects and starts from a snapshot.
      if (res.writableLength > MAX_BEHIND_BYTES) res.destroy()
      else res.write(data)
    }
  }

  const flush = () => {
    flushTimer = undefined
    const batches = queued
    queued = []
    queuedCount = 0
    if (batches.length > 0) broadcast({ type: 'events', batches })
  }

  const heard = (gate) => (events) => {
    const compacted = events.map(state.compact)
    state.apply(kept, gate, compacted)
    if (queuedCount + compacted.length > MAX_QUEUED_EVENTS) {
      // More than a page can follow at once: each reconnects and starts over from what is kept, which has them.
      queued = []
      queuedCount = 0
      broadcast({ type: 'resync' })
      return
    }
    queued.push([gate, compacted])
    queuedCount += compacted.length
    flushTimer ??= setTimeout(flush, FLUSH_MS).unref()
  }

  /** The page as an approver: each request waits in `pending` until the page answers or it no longer waits on the
   * page (its signal: decided elsewhere, the call ended, watching stopped, which closing the server does). */
  const approver = (gate) => (request) => new Promise((resolve) => {
    const id = nextApproval++
    const { turn, index, callId, toolName, arguments: args, rule, reason, signal } = request
    const approval = { id, gate, key: `${gate}/${turn}`, index, callId, toolName, args: JSON.stringify(args ?? {}, null, 2), rule, reason, at: Date.now() }
    const settle = (how) => {
      if (!pending.delete(id)) return
      broadcast({ type: 'approval_done', id })
      how()
    }
    pending.set(id, { approval, answer: (answer) => settle(() => resolve(answer)) })
    // No longer waiting on the page (the gate has set its answer aside): it leaves the page.
    signal.addEventListener('abort', () => settle(() => resolve(undefined)), { once: true })
    broadcast({ type: 'approval', approval })
  })

  const snapshotOf = () => ({ ...state.snapshot(kept), keepTurns, approvals: [...pending.values()].map((p) => p.approval) })

  /** Watching begins with the first page attached and ends with the last one gone. */
  const attach = (res) => {
    clearTimeout(stopTimer)
    if (stops.length === 0) {
      stops = list.map((gate, i) => gate.watch(heard(i), approvals ? { approve: approver(i) } : undefined))
    }
    pages.add(res)
  }
  /** Watching stops a little after the last page went, so that a page reloaded follows its turns to their end. */
  const detach = (res) => {
    if (!pages.delete(res) || pages.size > 0) return
    stopTimer = setTimeout(stopWatching, RELOAD_GRACE_MS).unref()
  }
  const stopWatching = () => {
    clearTimeout(stopTimer)
    for (const stop of stops) stop()
    stops = []
    // The turns still open are no longer followed: a page must not show them running for ever.
    state.unfollow(kept, Date.now())
  }

  /** Each gate's figures; the handlers not settled without their call ids, which only the trace shows redacted. */
  const health = () => list.map((gate, i) => ({
    gate: i,
    stats: gate.stats(),
    health: gate.healthReport(),
    inspect: gate.inspect({ limit: HEALTH_ENTRIES }),
    running: gate.pendingHandlers().slice(0, HEALTH_ENTRIES).map(({ toolName, attempt, state: phase, runningMs }) => ({ toolName, attempt, state: phase, runningMs })),
  }))

  /** An artifact a kept result names (no other file is served). */
  const artifactKept = (file) => {
    for (const turn of kept.turns.values()) {
      for (const call of turn.calls) {
        const meta = call?.result?.metadata
        if (meta && [meta.artifactPath, meta.command?.stdoutArtifact, meta.command?.stderrArtifact].includes(file)) return true
      }
    }
    return false
  }

  const answerApproval = async (req, res) => {
    const text = await bodyOf(req, res, MAX_APPROVAL_BYTES)
    if (text === undefined) return
    let body
    try {
      body = JSON.parse(text)
    } catch (err) {
      return send(res, 400, `the body is not JSON (${err.message})`)
    }
    const waiting = pending.get(body?.id)
    if (waiting === undefined) return send(res, 409, 'that approval is no longer waiting: it was answered or its call went on')
    if (body.decision !== 'approve' && body.decision !== 'deny') return send(res, 400, "decision must be 'approve' or 'deny'")
    const answer = { decision: body.decision }
    if (typeof body.reason === 'string' && body.reason !== '') answer.reason = body.reason
    if (body.decision === 'approve' && body.arguments !== undefined) {
      if (body.arguments === null || typeof body.arguments !== 'object' || Array.isArray(body.arguments)) return send(res, 400, 'edited arguments must be a JSON object')
      answer.arguments = body.arguments
    }
    waiting.answer(answer)
    sendJson(res, 200, { answered: body.id })
  }

  const runReplay = async (req, res, url) => {
    const gate = list[Number(url.searchParams.get('gate') ?? 0)]
    if (gate === undefined) return send(res, 400, 'no such gate')
    const text = await bodyOf(req, res, MAX_RECORDING_BYTES)
    if (text === undefined) return
    const { replay, parseRecording } = require('../testing/replay.js')
    let recording
    try {
      recording = parseRecording(text, 'the recording')
    } catch (err) {
      return send(res, 400, err.message)
    }
    try {
      const report = await replay(recording, ({ clock }) => gate[TWIN]({ clock }))
      sendJson(res, 200, {
        changed: report.changed,
        turns: report.turns.map((turn) => ({
          at: turn.at,
          changes: turn.changes,
          recorded: turn.recorded.map(state.compactResult),
          results: turn.results.map(state.compactResult),
        })),
      })
    } catch (err) {
      send(res, 500, `the replay failed: ${err?.message ?? err}`)
    }
  }

  const server = http.createServer((req, res) => {
    const address = /** @type {import('node:net').AddressInfo} */ (server.address())
    if (!hostAllowed(req.headers.host, host, address.port)) return send(res, 403, 'this page answers only to its own address (Host header refused)')
    const origin = req.headers.origin
    if (origin !== undefined && origin !== `http://${req.headers.host}`) return send(res, 403, 'requests from other pages are refused (Origin header)')
    const url = new URL(req.url ?? '/', 'http://devtools')
    if (!sameSecret(url.searchParams.get('token') ?? req.headers['x-toolgate-token'], token)) {
      return send(res, 401, 'this page needs its token: open the URL devtools() gave (it ends with ?token=…)')
    }
    const route = `${req.method} ${url.pathname}`
    if (route === 'GET /') {
      const page = html.replaceAll('{{TOKEN}}', token).replace('{{GATES}}', String(list.length))
      return send(res, 200, page, 'text/html; charset=utf-8', {
        'content-security-policy': "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
      })
    }
    if (req.method === 'GET' && ASSETS[url.pathname]) {
      const [file, type] = ASSETS[url.pathname]
      return send(res, 200, fs.readFileSync(path.join(__dirname, file)), type)
    }
    if (route === 'GET /events') {
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-store', 'x-content-type-options': 'nosniff', connection: 'keep-alive' })
      // A page let go reconnects after half a second (an event stream's own default is seconds).
      res.write(`retry: 500\ndata: ${JSON.stringify({ type: 'snapshot', ...snapshotOf() })}\n\n`)
      attach(res)
      req.on('close', () => detach(res))
      return
    }
    if (route === 'GET /health') {
      try {
        return sendJson(res, 200, health())
      } catch (err) {
        return send(res, 500, `a gate could not say how it is: ${err?.message ?? err}`)
      }
    }
    if (route === 'GET /artifact') {
      const file = url.searchParams.get('path') ?? ''
      if (!artifactKept(file)) return send(res, 404, 'no kept call names that artifact')
      const stream = fs.createReadStream(file)
      stream.on('error', () => send(res, 404, 'the artifact is gone (artifacts expire)'))
      stream.once('open', () => {
        res.writeHead(200, { 'content-type': 'text/plain; charset=utf-8', 'x-content-type-options': 'nosniff', 'content-security-policy': "default-src 'none'; sandbox" })
        stream.pipe(res)
      })
      return
    }
    if (route === 'POST /approve') {
      if (!approvals) return send(res, 403, 'this page does not answer approvals: devtools(gate, { approvals: true }) lets it')
      return void answerApproval(req, res)
    }
    if (route === 'POST /replay') return void runReplay(req, res, url)
    send(res, 404, 'not found')
  })

  await new Promise((resolve, reject) => {
    server.once('error', reject)
    server.listen(port, host, () => {
      server.off('error', reject)
      resolve(undefined)
    })
  })
  const address = /** @type {import('node:net').AddressInfo} */ (server.address())
  const shown = address.family === 'IPv6' ? `[${address.address}]` : address.address
  let closed
  return {
    url: `http://${shown}:${address.port}/?token=${token}`,
    close() {
      closed ??= new Promise((resolve) => {
        if (flushTimer) clearTimeout(flushTimer)
        stopWatching()
        for (const res of pages) res.end()
        pages.clear()
        server.closeAllConnections?.()
        server.close(() => resolve(undefined))
      })
      return closed
    },
  }
}

module.exports = { devtools }
