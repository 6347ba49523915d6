'use strict'
// What an executor's life needs beyond its turns: the executors its engine's wake-up finds, the processes of
// command tools killed when the process exits, the sweeping of expired artifacts, and waits bounded in time.

const { setTimeout, setInterval, clearInterval } = require('../timers.js')

/** How often `close()` and `job_kill` look whether the processes they stopped are gone. */
const COMMAND_POLL_MS = 20
/** How often artifacts past their TTL are looked for. */
const SWEEP_MS = 60_000

/**
 * Executors with a turn in flight, by engine id. Held strongly while a turn is open so that a turn waiting only
 * on a deadline is never collected; the engine's wake-up finds its executor here.
 */
const live = new Map()

/** Engines with command tools: their processes get SIGKILL when this process (or worker) exits. */
const withCommands = new Set()
let exitHooked = false

function killCommandsAtExit(engine) {
  withCommands.add(engine)
  if (exitHooked) return
  exitHooked = true
  process.on('exit', () => {
    for (const e of withCommands) {
      try {
        e.killCommands()
      } catch {
        // An engine that cannot answer holds no process to kill.
      }
    }
  })
}

/** The engine's wake-up, from its deadline watcher: the executor of that engine takes in what is due. */
function wake(engineId) {
  const onWake = live.get(engineId)
  if (onWake) onWake()
}

/** What `promise` resolves to, or undefined once `ms` pass first (the timer holds no process open). */
function withinTime(promise, ms, timers) {
  let timer
  const late = new Promise((resolve) => {
    timer = timers.setTimeout(resolve, ms)
    timer?.unref?.()
  })
  return Promise.race([promise, late]).finally(() => timers.clearTimeout(timer))
}

/** Resolves once `done()` is true, looking every `COMMAND_POLL_MS` in real time, whatever clock the executor runs
 * on: processes end in real time. */
async function lookUntil(done) {
  while (!done()) await new Promise((resolve) => setTimeout(resolve, COMMAND_POLL_MS))
}

/** Sweeps the engine's artifacts past their TTL now and then, without keeping the process or the engine alive. */
function sweepArtifactsWhileAlive(engine) {
  const ref = new WeakRef(engine)
  const timer = setInterval(() => {
    const alive = ref.deref()
    if (alive === undefined) clearInterval(timer)
    else alive.sweepArtifacts()
  }, SWEEP_MS)
  timer.unref()
}

module.exports = { live, withCommands, killCommandsAtExit, wake, withinTime, lookUntil, sweepArtifactsWhileAlive }
