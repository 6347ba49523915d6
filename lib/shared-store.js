// @ts-check
'use strict'
// A store shared between processes (`redisStore` of toolgate/redis, or any object keeping its contract): the
// executor hands it the operations the engine asks for and hands the replies back. The engine bounds every wait
// with the store's `timeoutMs`, so a store that never answers costs a call nothing but that time.

const { describeProblem } = require('./callbacks.js')
const { reprOf } = require('./engine/describe.js')
const { setImmediate } = require('./timers.js')
const { ON_ERROR_DEFAULTS } = require('./engine/wire.generated.js')

/** The stations a store's `onError` may set. */
const STATIONS = Object.keys(ON_ERROR_DEFAULTS)

/** The `store` executor option: the store object the JS layer keeps, and the settings the engine reads. */
function takeStore(options) {
  const { store } = options
  delete options.store
  if (store === undefined) return undefined
  if (store === null || typeof store !== 'object' || typeof store.run !== 'function' || typeof store.invalidate !== 'function') {
    throw new TypeError('ToolExecutor options: store must be a shared store, such as redisStore({ client }) from toolgate/redis')
  }
  const { timeoutMs, onError } = store
  if (!Number.isFinite(timeoutMs) || timeoutMs <= 0) throw new TypeError('ToolExecutor options: store.timeoutMs must be a positive number of milliseconds')
  const engine = { timeoutMs: Math.ceil(timeoutMs), onError: {} }
  for (const station of STATIONS) {
    const policy = onError?.[station]
    if (policy === undefined) continue
    if (policy !== 'open' && policy !== 'closed') throw new TypeError(`ToolExecutor options: store.onError.${station} must be 'open' or 'closed'`)
    engine.onError[station] = policy
  }
  return { store, engine }
}

/** Runs one step's tickets (`{ ticket, ops }`) as one batch, so that what a turn needs goes out together, and
 * answers each ticket through `answer(ticket, json)` as its operations are answered. A store may tell each reply
 * as it comes (`onReply(index, reply)`, as redisStore does), so that a node that is down or slow delays only the
 * operations on it: a ticket whose operations are not all in by the next turn of the loop is answered with those
 * that are (`null` for the others) and again as the rest come. A store that throws or rejects fails every
 * operation not answered yet with its reason; nothing escapes. Resolves once every ticket is answered.
 * @param {import('./engine/wire.generated').StoreTicket[]} tickets */
function runTickets(store, tickets, answer) {
  const ops = []
  // Per operation: its ticket's entry and its place there. Per ticket: the replies come and not sent yet (null for
  // none), how many those are, and how many operations are still out.
  const places = []
  const entries = tickets.map(({ ticket, ops: ticketOps }) => ({ ticket, replies: ticketOps.map(() => null), unsent: 0, out: ticketOps.length }))
  for (const [at, { ops: ticketOps }] of tickets.entries()) {
    for (const [place, op] of ticketOps.entries()) {
      ops.push(op)
      places.push([entries[at], place])
    }
  }
  const answered = ops.map(() => false)
  const send = (entry) => {
    let json
    try {
      json = JSON.stringify(entry.replies)
    } catch (err) {
      const why = `the store's reply could not be read (${describeProblem(err)})`
      json = JSON.stringify(entry.replies.map((reply) => (reply === null ? null : { error: why })))
    }
    entry.replies = entry.replies.map(() => null)
    entry.unsent = 0
    answer(entry.ticket, json)
  }
  let flushing = false
  const flush = () => {
    flushing = false
    for (const entry of entries) if (entry.unsent > 0) send(entry)
  }
  const onReply = (at, reply) => {
    if (!Number.isInteger(at) || at < 0 || at >= ops.length || answered[at]) return
    answered[at] = true
    const [entry, place] = places[at]
    // null in an answer means "not answered yet": whatever came, this operation has its reply now.
    const readable = reply !== null && typeof reply === 'object'
    entry.replies[place] = readable ? reply : { error: `the store answered ${reprOf(reply)} for this operation, not a reply` }
    entry.unsent += 1
    entry.out -= 1
    if (entry.out === 0) {
      send(entry)
    } else if (!flushing) {
      flushing = true
      setImmediate(flush)
    }
  }
  let pending
  try {
    pending = Promise.resolve(store.run(ops, onReply))
  } catch (err) {
    pending = Promise.reject(err)
  }
  return pending
    .then((replies) => {
      if (!Array.isArray(replies)) throw new TypeError(`the store answered ${describeProblem(replies)}, not one reply per operation`)
      for (const [at, reply] of replies.entries()) if (at < ops.length) onReply(at, reply)
      for (const at of ops.keys()) onReply(at, { error: 'the store gave no answer for this operation' })
    })
    .catch((err) => {
      for (const at of ops.keys()) onReply(at, { error: describeProblem(err) })
    })
}

module.exports = { takeStore, runTickets }
