'use strict'
// A store shared between processes (`redisStore` of toolgate/redis, or any object keeping its contract): the
// executor hands it the operations the engine asks for and hands the replies back. The engine bounds every wait
// with the store's `timeoutMs`, so a store that never answers costs a call nothing but that time.

const { describeProblem } = require('./callbacks.js')

const STATIONS = ['cache', 'dedup', 'rateLimit', 'sessions', 'budget', 'breaker']

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

/** Runs one step's tickets (`[ticket, ops]`) as one batch, so that what a turn needs goes out together, and
 * answers each ticket with its replies through `answer(ticket, json)`. A store that throws or rejects fails every
 * operation with its reason; nothing escapes. Resolves once every ticket is answered. */
function runTickets(store, tickets, answer) {
  const ops = []
  for (const [, ticketOps] of tickets) for (const op of ticketOps) ops.push(op)
  let pending
  try {
    pending = Promise.resolve(store.run(ops))
  } catch (err) {
    pending = Promise.reject(err)
  }
  return pending
    .then((replies) => {
      if (!Array.isArray(replies)) throw new TypeError(`the store answered ${describeProblem(replies)}, not one reply per operation`)
      return replies
    })
    .catch((err) => ops.map(() => ({ error: describeProblem(err) })))
    .then((replies) => {
      let at = 0
      for (const [ticket, ticketOps] of tickets) {
        const mine = replies.slice(at, at + ticketOps.length)
        at += ticketOps.length
        let json
        try {
          json = JSON.stringify(mine)
        } catch (err) {
          json = JSON.stringify(ticketOps.map(() => ({ error: `the store's reply could not be read (${describeProblem(err)})` })))
        }
        answer(ticket, json)
      }
    })
}

module.exports = { takeStore, runTickets }
