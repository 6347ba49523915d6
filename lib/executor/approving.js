// @ts-check
'use strict'
// Approvals answered by watchers (`gate.watch(listener, { approve })`), beside the application's callback: each
// watcher is asked with the call as a trace shows it, and its own signal aborts once the approval no longer waits on
// it (decided, the call ended, that watcher stopped). What it answers is read as the callback's answer is, its
// edited arguments applied to the call's own, since it was shown them redacted and capped.

const { callHost, readApproval } = require('../callbacks.js')

const isObject = (value) => value !== null && typeof value === 'object' && !Array.isArray(value)

/** Sets `key` as an own property, `__proto__` included (an assignment would set the prototype). */
function put(object, key, value) {
  if (key === '__proto__') Object.defineProperty(object, key, { value, enumerable: true, writable: true, configurable: true })
  else object[key] = value
}

/** A copy of plain data as the engine gives it (parsed from JSON), made by hand: several times faster than
 * structuredClone, and the same on such data. */
function copyOf(value) {
  if (value === null || typeof value !== 'object') return value
  if (Array.isArray(value)) return value.map(copyOf)
  const copy = {}
  for (const key of Object.keys(value)) put(copy, key, copyOf(value[key]))
  return copy
}

const PLACEHOLDER = /\[REDACTED:[^\]]+\]/g
const HAS_PLACEHOLDER = /\[REDACTED:[^\]]+\]/
/** How the engine marks what it left out of a shown value: a string's tail, an array's items, an object's keys. */
const CUT_TEXT = /… \[\d+ more characters\]$/
const CUT_ITEMS = /^… \d+ more items$/
const CUT_KEYS = '…'

const escapeRegExp = (text) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')
const sameJson = (a, b) => JSON.stringify(a) === JSON.stringify(b)

/** An edit the call's own value cannot be restored under: refused, since the handler would get the page's view. */
function unrestorable(what) {
  return new TypeError(`the edited arguments change ${what} that was shown redacted or cut: edit all of it, or leave it as shown`)
}

/**
 * A string the watcher changed, with each redaction it kept put back: the secrets `shown` hid in `own` are found by
 * aligning the two, and each placeholder left in `edited` takes the secret it stood for, in order.
 */
function restoreSecrets(own, shown, edited) {
  if (CUT_TEXT.test(shown) && CUT_TEXT.test(edited)) throw unrestorable('a text')
  const holders = shown.match(PLACEHOLDER)
  if (!holders || !HAS_PLACEHOLDER.test(edited)) return edited
  const found = new RegExp(`^${shown.split(PLACEHOLDER).map(escapeRegExp).join('([\\s\\S]*?)')}$`).exec(own)
  if (!found) throw unrestorable('a text')
  const secrets = new Map()
  holders.forEach((holder, i) => secrets.set(holder, [...(secrets.get(holder) ?? []), found[i + 1]]))
  return edited.replace(PLACEHOLDER, (holder) => {
    const next = secrets.get(holder)?.shift()
    if (next === undefined) throw unrestorable('a text')
    return next
  })
}

/**
 * Arguments a watcher edited, applied to the call's own: a value left as it was shown (redacted, cut) keeps the
 * call's; a key it was not shown is kept; a changed value is the watcher's, with the secrets it kept put back. An
 * edit inside a value shown cut is refused.
 */
function applyEdits(own, shown, edited) {
  if (sameJson(edited, shown)) return own
  if (isObject(own) && isObject(shown) && isObject(edited)) {
    const out = {}
    for (const key of Object.keys(edited)) {
      if (key === CUT_KEYS && Object.hasOwn(shown, CUT_KEYS)) continue
      put(out, key, Object.hasOwn(shown, key) ? applyEdits(own[key], shown[key], edited[key]) : edited[key])
    }
    for (const key of Object.keys(own)) if (!Object.hasOwn(shown, key) && !Object.hasOwn(out, key)) put(out, key, own[key])
    return out
  }
  if (Array.isArray(own) && Array.isArray(shown) && Array.isArray(edited)) {
    if (shown.some((item) => typeof item === 'string' && CUT_ITEMS.test(item))) throw unrestorable('a list')
    return edited.map((item, i) => (i < shown.length ? applyEdits(own[i], shown[i], item) : item))
  }
  if (typeof own === 'string' && typeof shown === 'string' && typeof edited === 'string') return restoreSecrets(own, shown, edited)
  return edited
}

class WatchApprovals {
  /** Per followed turn, per call's index, the approvers asked and not yet answered. */
  #asking = new Map()

  /**
   * Asks `approvers` (subscriptions with `approve`) about a call, with its id and arguments as shown. Returns each
   * one's answer, read as the callback's is (one that gives no decision, or throws, rejects: it decides nothing while
   * another may answer), and what tells them the approval was decided.
   */
  ask(approvers, traceId, index, { args, shownId, shownArgs, toolName, rule, reason }) {
    let turn = this.#asking.get(traceId)
    if (turn === undefined) this.#asking.set(traceId, (turn = new Map()))
    const asked = new Set()
    turn.set(index, asked)
    const answers = approvers.map((subscription) => new Promise((resolve, reject) => {
      const controller = new AbortController()
      const entry = {
        subscription,
        // No longer waiting on this watcher: its signal says why, and whatever it answers later decides nothing.
        end: (why) => {
          asked.delete(entry)
          subscription.asked.delete(entry)
          controller.abort(why)
          reject(new Error(`the watcher did not answer before ${why}`))
        },
      }
      asked.add(entry)
      subscription.asked.add(entry)
      const request = Object.freeze({ turn: traceId, index, callId: shownId, toolName, arguments: shownArgs, rule, reason, signal: controller.signal })
      callHost(() => subscription.approve(request)).then((answer) => {
        if (answer === undefined || answer === null) throw new Error('a watcher gave no decision')
        const read = readApproval(answer)
        if (read.arguments !== undefined) read.arguments = applyEdits(args, shownArgs, read.arguments)
        return read
      }).then(resolve, reject)
    }))
    return { answers, decided: () => this.#end(traceId, index, 'the approval was decided') }
  }

  /** A call's approval no longer waits (the engine took an answer, or the call ended): its watchers are told. */
  ended(traceId, index, why) {
    this.#end(traceId, index, why)
  }

  /** A turn ended: whatever still waited on its watchers is told. */
  turnEnded(traceId) {
    for (const index of [...(this.#asking.get(traceId)?.keys() ?? [])]) this.#end(traceId, index, 'the call ended')
    this.#asking.delete(traceId)
  }

  /** A watcher stopped: each approval waiting on it no longer does (others may still answer). */
  stopped(subscription) {
    for (const entry of [...subscription.asked]) entry.end('watching stopped')
  }

  #end(traceId, index, why) {
    const turn = this.#asking.get(traceId)
    const asked = turn?.get(index)
    if (asked === undefined) return
    turn.delete(index)
    for (const entry of [...asked]) entry.end(why)
  }
}

module.exports = { WatchApprovals, applyEdits, copyOf }
