'use strict'
// The timers toolgate schedules its own work with, taken when the package loads. A test that fakes timers
// (vitest's `vi.useFakeTimers()`, @sinonjs/fake-timers: they replace `globalThis`'s and the node:timers module's)
// must neither stall the package nor change what it does: a deadline, a large output crossing in slices, trace
// delivery, `close()` and the times `pendingHandlers()` reports keep real time. Timers already faked when the package loads are seen through: fake-timers
// keeps each original on its clock as `_<name>`.

const timers = require('node:timers')

function real(name, fallback) {
  const current = timers[name] ?? fallback
  const original = current?.clock?.[`_${name}`]
  return typeof original === 'function' ? original : current
}

/** `Date.now` as it was: fake timers replace `Date` (the real one stays on their clock as `_Date`). */
const RealDate = globalThis.Date.clock?._Date ?? globalThis.Date

/** `performance.now` as it was, and where it starts in epoch ms: a fraction of a ms tells a run that ended just
 * inside a time limit from one that met it. */
const realPerformanceNow = performance.now.bind(performance)
const PRECISE_ORIGIN = RealDate.now() - realPerformanceNow()

module.exports = {
  now: () => RealDate.now(),
  preciseNow: () => PRECISE_ORIGIN + realPerformanceNow(),
  setTimeout: real('setTimeout'),
  clearTimeout: real('clearTimeout'),
  setInterval: real('setInterval'),
  clearInterval: real('clearInterval'),
  setImmediate: real('setImmediate'),
  queueMicrotask: real('queueMicrotask', globalThis.queueMicrotask),
}
