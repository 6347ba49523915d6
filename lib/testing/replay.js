'use strict'
// Recorded turns (the executor's `record` option) run again against the gate as it is today: `loadRecording` reads
// them, `replay` runs each on a manual clock with its handlers, checks, costs and approvals answering as recorded
// (or its handlers live), and reports what each call now gives differently; `expectUnchanged` fails a test on it.

const fs = require('node:fs/promises')
const { AssertionError } = require('node:assert')
const { inspect } = require('node:util')
// Taken at load: a replay keeps real time under a test's faked timers and Date.
const { setImmediate, setTimeout } = require('node:timers')
const realNow = Date.now
const realTimeout = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
const { RECORDING_VERSION } = require('../../index.js')
const { manualClock, sleepOn } = require('./clock.js')

/** The turn option under which a replayed turn is handed what was recorded (the executor reads it). */
const REPLAY = Symbol.for('toolgate.replay')
/** What a call's result is compared on; the metadata's fields say what a station decided. */
const COMPARED = ['name', 'success', 'errorKind', 'error', 'output', 'attempts', 'cached', 'truncated']
const COMPARED_METADATA = ['permission', 'repairs', 'sharedFlight', 'reused']
/** How often a replay moves its clock along with real time while live handlers run, in ms. */
const LIVE_STEP_MS = 2
const HANDLER_MODES = ['recorded', 'live']
const ANSWER_KINDS = ['check', 'cost', 'approve']
/** Each outcome a run may have, and whether the run has what replaying it needs (true, or what it lacks). */
const OUTCOMES = {
  returned: (run) => typeof run.valueKind === 'string' || 'a returned run without its valueKind',
  threw: (run) => (run.error !== null && typeof run.error === 'object') || 'a run that threw without its error',
  command: () => true,
  none: () => true,
}
/** How a command the gate stopped ended. */
const STOPPED = ['timeout', 'idle_timeout', 'cancelled']
/** How long a recorded turn may wait on nothing the clock or the recording will ever answer, in real ms. */
const STALL_MS = 10_000
/** How long the application's own code running live (a check, a schema's validation) is waited for in real time
 * before it counts as hung, in real ms: the clock then moves on to the gate's own limit for it. */
const LIVE_PATIENCE_MS = 2_000
/** The id of the fence around an untrusted tool's output: new for every result. */
const FENCE_ID = /(<\/?untrusted-data[^>]* id=")[A-Za-z0-9]+(")/g

/** Whether `entry` has the fields a replay reads; the problem when it has not. */
function problemOf(entry) {
  if (entry === null || typeof entry !== 'object' || Array.isArray(entry)) return 'not an object'
  if (entry.version !== RECORDING_VERSION) return `version ${inspect(entry.version)} is not one this toolgate reads (${RECORDING_VERSION})`
  if (!Number.isFinite(entry.at)) return 'no "at" (when the turn began)'
  if (entry.kind !== 'execute' && entry.kind !== 'streaming') return `"kind" must be "execute" or "streaming", got ${inspect(entry.kind)}`
  for (const key of ['calls', 'runs', 'answers', 'results']) if (!Array.isArray(entry[key])) return `"${key}" must be an array`
  if (entry.results.length !== entry.calls.length && entry.kind === 'execute') return `${entry.calls.length} calls but ${entry.results.length} results`
  for (const run of entry.runs) {
    if (!Number.isInteger(run?.index) || !Number.isInteger(run.attempt) || run.attempt < 1 || !Number.isFinite(run.durationMs)) return 'a run without its index, attempt and durationMs'
    const problem = OUTCOMES[run.outcome]?.(run) ?? `a run's outcome must be one of ${Object.keys(OUTCOMES).join(', ')}, got ${inspect(run.outcome)}`
    if (problem !== true) return problem
  }
  for (const answer of entry.answers) {
    if (!Number.isInteger(answer?.index) || !ANSWER_KINDS.includes(answer.kind) || !Number.isFinite(answer.atMs)) return 'an answer without its index, kind and atMs'
    if (!answer.unanswered && (!Number.isFinite(answer.durationMs) || answer.answer === null || typeof answer.answer !== 'object')) return 'an answer without its durationMs and answer'
  }
  return undefined
}

/**
 * A recording: a JSONL file the executor wrote (the path) or its entries. Refuses an entry it cannot replay, naming
 * its line (or index) and what is wrong with it.
 */
async function loadRecording(fileOrEntries) {
  if (typeof fileOrEntries === 'string') return parseRecording(await fs.readFile(fileOrEntries, 'utf8'), fileOrEntries)
  if (!Array.isArray(fileOrEntries)) throw new TypeError('loadRecording(fileOrEntries): expected a file path or an array of recorded entries')
  for (const [i, entry] of fileOrEntries.entries()) {
    const problem = problemOf(entry)
    if (problem) throw new TypeError(`loadRecording: entry ${i}: not a recorded turn: ${problem}`)
  }
  return { entries: [...fileOrEntries] }
}

/** A recording's JSONL text, read as `loadRecording` reads a file (`name` says where it came from in errors). */
function parseRecording(text, name) {
  const entries = []
  for (const [i, line] of text.split('\n').entries()) {
    if (line.trim() === '') continue
    let entry
    try {
      entry = JSON.parse(line)
    } catch (err) {
      throw new SyntaxError(`loadRecording: ${name}:${i + 1}: not JSON (${err.message})`)
    }
    const problem = problemOf(entry)
    if (problem) throw new TypeError(`loadRecording: ${name}:${i + 1}: not a recorded turn: ${problem}`)
    entries.push(entry)
  }
  return { entries }
}

/** What a handler returns or throws to give the engine what the recorded run gave it. */
function outcomeOf(run, result) {
  switch (run.outcome) {
    case 'returned':
      // A value its call's result holds as its structure is not repeated in the run.
      if (run.valueFrom === 'result') return { value: result?.metadata?.structured }
      if (run.valueKind === 'binary') return { value: run.text === undefined ? Buffer.from(run.value, 'base64') : Buffer.from(run.text, 'utf8') }
      if (run.valueKind === 'none') return { value: undefined }
      // A value that could not be read then cannot be now, for the same reason.
      if (run.valueKind === 'unrepresentable') return { value: { toJSON() { throw new Error(run.value) } } }
      return { value: run.value }
    case 'threw':
      return { thrown: thrownOf(run.error) }
    case 'command':
      // What the engine read of the process stays in the engine; its result is what there is. A command the gate
      // stopped replays as a run that never answers (the gate's limits decide again); another as the result's text
      // or error.
      if (STOPPED.includes(result?.errorKind)) return undefined
      return result?.success ? { value: result.output } : { thrown: new Error(result?.error ?? 'the command failed') }
    default:
      return undefined // no answer while it was watched
  }
}

/** A recorded thrown value as a value that describes the same. */
function thrownOf(error) {
  if (error.nonError !== undefined) {
    if (error.nonError.startsWith('undefined')) return undefined
    try {
      return JSON.parse(error.nonError)
    } catch {
      return error.nonError
    }
  }
  const thrown = new Error(error.message)
  thrown.name = error.name
  for (const key of ['code', 'status', 'retryable', 'retryAfterMs']) if (error[key] !== undefined) thrown[key] = error[key]
  if (error.causeCode !== undefined) thrown.cause = { code: error.causeCode }
  return thrown
}

/** What a replayed turn is handed: each run answers, after its recorded time on `clock`, as it did. An attempt that
 * was not recorded answers as the call's last recorded one; a call that did not run says so. */
function standInFor(entry, clock, handlers) {
  const work = { live: 0 }
  const runs = new Map()
  for (const run of entry.runs) {
    const list = runs.get(run.index) ?? []
    list[run.attempt - 1] = run
    runs.set(run.index, list)
  }
  const answers = new Map(entry.answers.map((a) => [`${a.kind}\u0001${a.index}`, a]))
  // What ended at once ends before anything else of the same moment (a cancellation recorded then came after it).
  const later = (ms, signal) => (ms === 0 ? Promise.resolve() : sleepOn(clock, ms, signal))
  return {
    handler: handlers === 'live' ? () => undefined : (name, index, attempt) => {
      const list = runs.get(index)
      const run = list?.[attempt - 1] ?? list?.findLast(Boolean)
      if (run === undefined) return () => Promise.reject(new Error(`the recording has no run of this call of "${name}": it did not run when recorded`))
      const outcome = outcomeOf(run, entry.results[index])
      return (_input, ctx) => {
        // Progress when it came: an idle limit is kept at bay as it was.
        for (const ms of run.progressMs ?? []) later(ms, ctx.signal).then(() => ctx.progress(), () => {})
        if (outcome === undefined) return new Promise(() => {})
        return later(run.durationMs, ctx.signal).then(() => {
          if ('thrown' in outcome) throw outcome.thrown
          return outcome.value
        })
      }
    },
    answer: (kind, index) => {
      const recorded = answers.get(`${kind}\u0001${index}`)
      // Only approvals are taken from the recording when the tools' own functions run live.
      if (recorded === undefined || (handlers === 'live' && kind !== 'approve')) return undefined
      // None came while the turn ran: the gate's own time limit answers for it again.
      if (recorded.unanswered) return new Promise(() => {})
      return later(recorded.durationMs).then(() => {
        if (kind === 'approve' && recorded.answer.error !== undefined) throw new Error(recorded.answer.error)
        return recorded.answer
      })
    },
    // A turn that began cancelled begins so again, with what the engine was told.
    cancelled: entry.cancelled?.before ? entry.cancelled.reason : undefined,
    /** Work of the application's own functions running live (a schema's validation, a check not recorded). */
    live: (n) => { work.live += n },
    work,
  }
}

/** The text a result shows, with where an artifact was saved (a new file each run) put aside. */
function comparable(text, result) {
  if (typeof text !== 'string') return text
  const path = result?.metadata?.artifactPath
  // So is the id of the fence around an untrusted tool's output.
  return (path ? text.split(path).join('<artifact>') : text).replace(FENCE_ID, '$1<id>$2')
}

function same(a, b) {
  return JSON.stringify(a) === JSON.stringify(b)
}

/** The fields in which `now` differs from `recorded`. */
function changesOf(recorded, now) {
  const changes = []
  const callId = now?.callId ?? recorded?.callId
  const name = now?.name ?? recorded?.name
  if (recorded === undefined || now === undefined) {
    changes.push({ callId, name, field: 'result', recorded: recorded === undefined ? undefined : 'a result', now: now === undefined ? undefined : 'a result' })
    return changes
  }
  for (const field of COMPARED) {
    const [was, is] = [comparable(recorded[field], recorded), comparable(now[field], now)]
    if (!same(was, is)) changes.push({ callId, name, field, recorded: was, now: is })
  }
  for (const field of COMPARED_METADATA) {
    const [was, is] = [recorded.metadata?.[field], now.metadata?.[field]]
    if (!same(was, is)) changes.push({ callId, name, field: `metadata.${field}`, recorded: was, now: is })
  }
  return changes
}

/** A recorded turn run again: on `gate`, its calls as they came (a streaming turn's at their recorded times), then its
 * end, then its cancellation at its time (at the same moment, in that order, as they were recorded). Resolves to
 * the results, and the stand-in's count of live work. */
function runTurn(gate, entry, clock, handlers) {
  const standIn = standInFor(entry, clock, handlers)
  // A context that could not be recorded as JSON says so in its place: the turn replays without one.
  const context = entry.context !== null && typeof entry.context === 'object' ? entry.context : undefined
  const options = { ...entry.options, context, [REPLAY]: standIn }
  const controller = new AbortController()
  options.signal = controller.signal
  let results
  if (entry.kind === 'execute') {
    results = gate.execute(entry.calls, options)
  } else {
    const turn = gate.turn(options)
    entry.calls.forEach((call, i) => clock.setTimeout(() => turn.open && turn.add(call).catch(() => {}), entry.arrivedMs?.[i] ?? 0))
    // A turn recorded without its end was ended by its deadline or a cancellation; without either (an engine that
    // failed), it ends after its last call.
    const endedMs = entry.endedMs ?? (entry.cancelled || entry.options?.deadlineMs ? undefined : Math.max(0, ...(entry.arrivedMs ?? [])))
    if (endedMs !== undefined) clock.setTimeout(() => turn.open && turn.end(), endedMs)
    results = turn.results
  }
  const { cancelled } = entry
  if (cancelled && !cancelled.before) {
    // Closing ends the turn as the executor's close() did; the reason as the caller gave it reads the same.
    // After what settled at the same moment has crossed (a turn of the event loop): it settled first when recorded.
    const cancel = cancelled.closed ? () => gate.close({ timeoutMs: 0 }) : () => controller.abort({ message: cancelled.reason })
    clock.setTimeout(() => setImmediate(cancel), cancelled.atMs)
  }
  return { results, work: standIn.work }
}

/** Moves `clock` until `done` settles: from one due moment to the next (recorded answers come on it), or along with
 * real time while the application's own code runs live (handlers in a live replay, a schema's validation, a check
 * not recorded): it takes real time. */
async function driveUntil(done, work, gate, clock, handlers) {
  let finished = false
  done.then(() => { finished = true }, () => { finished = true })
  let idleSince
  // Live work as last seen, and since when: work that stays as it is past LIVE_PATIENCE_MS is hung.
  let seen = { live: 0, since: realNow() }
  while (!finished) {
    if (work.live !== seen.live) seen = { live: work.live, since: realNow() }
    const patient = work.live > 0 && realNow() - seen.since < LIVE_PATIENCE_MS
    if (patient || (handlers === 'live' && gate.running > 0)) {
      idleSince = undefined
      const before = realNow()
      await realTimeout(LIVE_STEP_MS)
      await clock.advance(realNow() - before)
    } else if ((await clock.next()) !== 0 || finished) {
      idleSince = undefined
    } else {
      // Nothing due on the clock: the gate waits on real work (a shared store), or on nothing that will come.
      idleSince ??= realNow()
      if (realNow() - idleSince > STALL_MS) throw new Error(`replay: a turn waited ${STALL_MS} ms on nothing its clock or its recording answers`)
      await realTimeout(1)
    }
  }
  return done
}

/**
 * Replays `recording` against the gate `setup({ clock })` builds, turn after turn in the order they began, on one
 * manual clock: a gate for each executor that recorded turns (a turn during which its executor was closed closes
 * the gate, and its next turn gets a new one). Resolves to `{ turns: [{ at, results,
 * recorded, changes }], changed }`: `changed` counts the calls that differ.
 */
async function replay(recording, setup, options = {}) {
  const { entries } = Array.isArray(recording) ? await loadRecording(recording) : recording ?? {}
  if (!Array.isArray(entries)) throw new TypeError('replay(recording, setup): recording must be what loadRecording() resolved to, or its entries')
  if (typeof setup !== 'function') throw new TypeError('replay(recording, setup): setup must be a function ({ clock }) => ToolExecutor')
  const { handlers = 'recorded' } = options
  if (!HANDLER_MODES.includes(handlers)) throw new TypeError(`replay(…, { handlers }): handlers must be one of ${HANDLER_MODES.join(', ')}; got ${inspect(handlers)}`)
  const clock = manualClock({ now: entries[0]?.at ?? 0 })
  const build = async () => {
    const gate = await setup({ clock })
    if (gate === null || typeof gate?.execute !== 'function' || typeof gate.turn !== 'function') {
      throw new TypeError('replay(recording, setup): setup must return (or resolve to) the ToolExecutor to replay against')
    }
    return gate
  }
  // A gate per executor that wrote the turns (processes, restarts), each made when its first turn comes.
  const gates = new Map()
  const turns = []
  let changed = 0
  try {
    // In the order they began (a file has them in the order they ended).
    for (const entry of [...entries].sort((a, b) => a.at - b.at)) {
      const gap = entry.at - clock.now()
      if (gap > 0) await clock.advance(gap)
      const gate = gates.get(entry.executor) ?? (await build())
      gates.set(entry.executor, gate)
      const { results: done, work } = runTurn(gate, entry, clock, handlers)
      const results = await driveUntil(done, work, gate, clock, handlers)
      const byCall = Math.max(results.length, entry.results.length)
      const changes = []
      for (let i = 0; i < byCall; i++) {
        const found = changesOf(entry.results[i], results[i])
        if (found.length > 0) changed += 1
        changes.push(...found)
      }
      turns.push({ at: entry.at, results, recorded: entry.results, changes })
      if (entry.cancelled?.closed) {
        await gate.close({ timeoutMs: 0 })
        gates.delete(entry.executor)
      }
    }
  } finally {
    // Handlers that recorded no answer never settle: nothing is waited for.
    await Promise.all([...gates.values()].map((gate) => gate.close({ timeoutMs: 0 })))
  }
  return { turns, changed }
}

/** A value as a change shows it: a long output cut, so that one does not bury the rest. */
const show = (value) => inspect(value, { maxStringLength: 300, breakLength: Infinity, depth: 4 })

/** Throws an AssertionError listing every change, when `report` (what `replay` resolved to) has any. */
function expectUnchanged(report) {
  if (report === null || typeof report !== 'object' || !Array.isArray(report.turns)) {
    throw new TypeError(`expectUnchanged(report): expected what replay() resolved to, got ${show(report)}`)
  }
  const lines = []
  for (const [t, turn] of report.turns.entries()) {
    for (const c of turn.changes) lines.push(`  turn ${t}, call ${show(c.callId)} (${c.name}): ${c.field}: recorded ${show(c.recorded)}, now ${show(c.now)}`)
  }
  if (lines.length === 0) return
  throw new AssertionError({
    message: `expected the replayed turns to give what was recorded; ${report.changed} call${report.changed === 1 ? '' : 's'} changed:\n${lines.join('\n')}`,
    operator: 'expectUnchanged',
    stackStartFn: expectUnchanged,
  })
}

module.exports = { loadRecording, parseRecording, replay, expectUnchanged }
