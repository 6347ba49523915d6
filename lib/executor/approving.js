// @ts-check
'use strict'
// Approvals answered by watchers (`gate.watch(listener, { approve })`), beside the application's callback: each
// watcher is asked with the call as a trace shows it, and its own signal aborts once the approval no longer waits on
// it (decided, the call ended, that watcher stopped). What it answers is read as the callback's answer is, its
// edited arguments applied to the call's own, since it was shown them redacted and capped.

const { callHost, readApproval } = require('../callbacks.js')
const { put } = require('../engine/wire.js')

const isObject = (value) => value !== null && typeof value === 'object' && !Array.isArray(value)

/** What the engine puts in place of what it hides from a shown value: a redaction, a string's cut tail, a list's
 * cut items, an object's cut keys (`"…": "N more keys"`). */
const PLACEHOLDER = /\[REDACTED:[^\]]+\]/
const CUT_TEXT = /… \[\d+ more characters\]$/
const CUT_ITEMS = /^… \d+ more items$/
const CUT_KEYS = '…'
const cutKeys = (object) => Object.hasOwn(object, CUT_KEYS) && /^\d+ more keys$/.test(String(object[CUT_KEYS]))

const sameJson = (a, b) => JSON.stringify(a) === JSON.stringify(b)

/** Whether a value holds something only shown: a redaction, or a mark of what was cut. */
function holdsShown(value) {
  if (typeof value === 'string') return PLACEHOLDER.test(value) || CUT_TEXT.test(value) || CUT_ITEMS.test(value)
  if (Array.isArray(value)) return value.some(holdsShown)
  if (isObject(value)) return cutKeys(value) || Object.entries(value).some(([key, child]) => PLACEHOLDER.test(key) || holdsShown(child))
  return false
}

/** An edit the call's own value cannot be restored under: refused, since the handler would get the page's view. */
function unrestorable(path) {
  return new TypeError(`the edited arguments change ${path || 'the arguments'}, which holds a value shown redacted or cut: give all of it anew, or leave it as it was shown`)
}

/**
 * Arguments a watcher edited, applied to the call's own: a value left as it was shown (redacted, cut) keeps the
 * call's; a key it was not shown is kept (and a redacted key stays the real one); a changed value is taken as the
 * watcher gave it, and refused if it still holds something only shown (a redaction, a cut's mark), which the
 * handler would otherwise get instead of the real value.
 */
function applyEdits(own, shown, edited, path = '') {
  if (sameJson(edited, shown)) return own
  if (isObject(own) && isObject(shown) && isObject(edited)) {
    // Shown keys stand for the call's own in order (redaction renames a key in place; a cut drops the last ones).
    const ownKeys = Object.keys(own)
    const shownKeys = Object.keys(shown).filter((key) => !(key === CUT_KEYS && cutKeys(shown)))
    const realKey = new Map(shownKeys.map((key, i) => [key, ownKeys[i]]))
    const out = {}
    for (const key of Object.keys(edited)) {
      if (key === CUT_KEYS && cutKeys(edited) && cutKeys(shown)) continue
      const at = `${path}/${key}`
      if (realKey.has(key)) {
        const real = realKey.get(key)
        // A key shown as it is must be the same key: else the order did not hold, and nothing can be mapped.
        if (real !== key && !PLACEHOLDER.test(key)) throw unrestorable(path)
        put(out, real, applyEdits(own[real], shown[key], edited[key], at))
      } else if (PLACEHOLDER.test(key) || holdsShown(edited[key])) {
        throw unrestorable(at)
      } else {
        put(out, key, edited[key])
      }
    }
    for (const key of ownKeys.slice(shownKeys.length)) if (!Object.hasOwn(out, key)) put(out, key, own[key])
    return out
  }
  if (holdsShown(edited)) throw unrestorable(path)
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
    return { answers, decided: () => this.ended(traceId, index, 'the approval was decided') }
  }

  /** A call's approval no longer waits (decided, the engine took an answer, the call ended): its watchers are told. */
  ended(traceId, index, why) {
    const turn = this.#asking.get(traceId)
    const asked = turn?.get(index)
    if (asked === undefined) return
    turn.delete(index)
    for (const entry of [...asked]) entry.end(why)
  }

  /** A turn ended: whatever still waited on its watchers is told. */
  turnEnded(traceId) {
    for (const index of [...(this.#asking.get(traceId)?.keys() ?? [])]) this.ended(traceId, index, 'the call ended')
    this.#asking.delete(traceId)
  }

  /** A watcher stopped: each approval waiting on it no longer does (others may still answer). */
  stopped(subscription) {
    for (const entry of [...subscription.asked]) entry.end('watching stopped')
  }
}

module.exports = { WatchApprovals }
