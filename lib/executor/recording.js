// @ts-check
'use strict'
// Turns recorded to be replayed (`record` option; `replay()` of toolgate/testing reads them): per turn, the calls as
// received, its options and the context the gate reads, each handler run's outcome as the handler gave it, the
// answers of checks, costs and approvals, and the results. Redacted whole by the executor's rules, bounded, and
// never able to fail a turn: a write that fails is counted and reported once.

const path = require('node:path')
const { isUtf8 } = require('node:buffer')
const { randomUUID } = require('node:crypto')
const { JsonlSink } = require('../observe.js')
const { SETTLEMENT_KIND } = require('../engine/wire.generated.js')
const { bigintToString, jsonOf, textOf } = require('../engine/describe.js')
const { pick } = require('../options.js')
const { warn } = require('../callbacks.js')

/** The format of an entry; a reader of recordings refuses versions it does not know. */
const RECORDING_VERSION = 1
/** A recording file's size before it rotates, unless told otherwise. */
const RECORD_MAX_BYTES = 64 * 1024 * 1024
/** Rotated recording files kept beside the current one, unless told otherwise. */
const RECORD_KEEP = 1
/** The context fields the gate reads besides its plain string and number fields (see `policyJson`). */
const POLICY_FIELDS = ['permissions', 'maxRisk', 'budget', 'allowedTools', 'deniedTools', 'approvedTools']
/** What a run's settlement kind is recorded as: the outcome and the form of its value. */
const RETURNED = new Set([SETTLEMENT_KIND.text, SETTLEMENT_KIND.json, SETTLEMENT_KIND.none, SETTLEMENT_KIND.binary, SETTLEMENT_KIND.unrepresentable])

/** The `record` option read: `{ to, maxBytes, keep, sample, include }`, or a TypeError saying what to fix. */
function readRecordOptions(record) {
  const what = 'ToolExecutor options: record'
  if (record === null || typeof record !== 'object') throw new TypeError(`${what} must be { to, maxBytes?, keep?, sample?, include? }`)
  const { to, maxBytes = RECORD_MAX_BYTES, keep = RECORD_KEEP, sample = 1, include = [] } = pick(record, ['to', 'maxBytes', 'keep', 'sample', 'include'], what)
  if (!((typeof to === 'string' && to !== '') || typeof to === 'function')) throw new TypeError(`${what}.to must be a file path or a function (entry) => void`)
  if (!(Number.isInteger(maxBytes) && maxBytes > 0)) throw new TypeError(`${what}.maxBytes must be a positive integer`)
  if (!(Number.isInteger(keep) && keep >= 0)) throw new TypeError(`${what}.keep must be a non-negative integer`)
  if (!(typeof sample === 'number' && sample >= 0 && sample <= 1)) throw new TypeError(`${what}.sample must be a number from 0 to 1 (the share of turns recorded)`)
  if (!Array.isArray(include) || !include.every((key) => typeof key === 'string')) throw new TypeError(`${what}.include must be an array of context field names`)
  return { to, maxBytes, keep, sample, include }
}

/** The recording files of this process, by resolved path: executors recording to one file share its sink, so that
 * its size, and when it rotates, is counted once. */
const SINKS = new Map()

function openSink({ to, maxBytes, keep }) {
  const file = path.resolve(to)
  let shared = SINKS.get(file)
  if (shared === undefined) {
    shared = { sink: new JsonlSink({ file, maxBytes, keep }), users: 0 }
    SINKS.set(file, shared)
  }
  shared.users += 1
  return {
    sink: shared.sink,
    close: () => {
      shared.users -= 1
      if (shared.users > 0) return
      shared.sink.close()
      SINKS.delete(file)
    },
  }
}

class Recorder {
  #options
  /** The file, shared with other executors of this process recording to it: `{ sink, close }`. */
  #file
  /** Which executor wrote an entry: a replay gives each its own gate. */
  #id = randomUUID().slice(0, 8)
  #engine
  #now
  #failed
  #closed = false
  #counts = { recorded: 0, sampledOut: 0, tooLarge: 0, failed: 0 }

  /** `now()`: the executor's clock; `failed(message)`: tells the trace listeners, once, that writing failed. */
  constructor(options, { engine, now, failed }) {
    this.#options = options
    this.#engine = engine
    this.#now = now
    this.#failed = failed
    if (typeof options.to === 'string') this.#file = openSink(options)
  }

  /** What `stats().recording` shows. */
  counts() {
    return { ...this.#counts }
  }

  /** A turn beginning: its recording, or undefined when this turn is not sampled. */
  begin({ calls, turnOptions, context, streaming }) {
    if (this.#options.sample < 1 && !(Math.random() < this.#options.sample)) {
      this.#counts.sampledOut += 1
      return undefined
    }
    return new TurnRecording(this, this.#now, { executor: this.#id, calls, turnOptions, context: this.#contextOf(context), streaming })
  }

  /** The context as the gate reads it (its plain fields and the policy it names), and the fields `include` names. */
  #contextOf(context) {
    if (context === null || typeof context !== 'object') return undefined
    const kept = {}
    for (const [key, value] of Object.entries(context)) {
      if (typeof value === 'string' || typeof value === 'number' || POLICY_FIELDS.includes(key) || this.#options.include.includes(key)) kept[key] = value
    }
    return kept
  }

  /** Whether a turn whose values add up to `chars` can still fit in one entry. */
  fits(chars) {
    return chars <= this.#options.maxBytes
  }

  /** A finished turn's entry written: `text`, its JSON without the calls and results, and `calls`, a JSON array,
   * each redacted whole (arguments sent as JSON text as the values they hold); the results as the engine shaped them.
   * Turns that end once the executor has closed are not written. */
  write(text, calls, results) {
    if (this.#closed) return
    const line = `${this.#engine.redacted(text, false).slice(0, -1)},"calls":${this.#engine.redacted(calls, true)},"results":${this.#resultsJson(results)}}`
    if (Buffer.byteLength(line) > this.#options.maxBytes) return this.tooLarge()
    if (this.#file) {
      this.#file.sink.writeLine(line)
      this.#counts.recorded += 1
      return
    }
    const given = this.#options.to(JSON.parse(line))
    // A function that returns a promise is awaited: its rejection is a failed write, not an unhandled one.
    if (typeof given?.then !== 'function') {
      this.#counts.recorded += 1
      return
    }
    Promise.resolve(given).then(() => { this.#counts.recorded += 1 }, (err) => this.failed(err))
  }

  /** Results were redacted as the engine shaped them: their outputs, errors and structure. The rest, a call's id as
   * the model sent it and the metadata (repairs' before and after, a command's spawn error, a store's error), is
   * redacted here, in one crossing that stays small whatever the outputs. A thrown error's stack is left out, as
   * from the runs: where the code lives is not the call's. */
  #resultsJson(results) {
    const sent = JSON.stringify(results.map((r) => [r.callId, r.metadata === undefined ? null : { ...r.metadata, structured: undefined, stages: undefined, timings: undefined, starts: undefined, stack: undefined }]))
    const clean = this.#engine.redacted(sent, false)
    if (clean === sent && !results.some((r) => r.metadata?.stack !== undefined)) return JSON.stringify(results)
    const shown = JSON.parse(clean)
    return JSON.stringify(results.map((r, i) => {
      const [callId, metadata] = shown[i]
      if (metadata === null) return { ...r, callId }
      const { structured, stages, timings, starts } = r.metadata
      return { ...r, callId, metadata: { ...metadata, structured, stages, timings, starts } }
    }))
  }

  /** A turn too large to record: counted, and nothing of it kept. */
  tooLarge() {
    this.#counts.tooLarge += 1
  }

  /** A turn that could not be recorded (its entry could not be built, redacted or written): counted, and said once. */
  failed(err) {
    this.#counts.failed += 1
    if (this.#counts.failed === 1) {
      warn('a turn could not be recorded', err)
      this.#failed(textOf(err))
    }
  }

  close() {
    if (this.#closed) return
    this.#closed = true
    this.#file?.close()
  }
}

/** One turn as it is recorded while it runs. Times are ms since the turn began, on the executor's clock. Nothing it
 * does may fail the turn: a hook that throws drops the recording, counted as failed. */
class TurnRecording {
  #recorder
  #now
  #began
  #head
  #calls
  #context
  /** When each call arrived (a streaming turn's). */
  #arrived
  #ended
  #cancelled
  /** Runs by run id while they run: their index, attempt, start and progress reports. */
  #running = new Map()
  /** Ended runs, in the order they ended (see `#keep`). */
  #runs = []
  #answers = []
  /** The application's answers asked for and not given yet, by `kind\u0001index`. */
  #asked = new Map()
  /** The characters of the values kept so far: past the recorder's bound, the turn is dropped, not built. */
  #chars = 0
  /** Why the turn is not recorded: 'tooLarge' or 'failed'. */
  #dropped

  constructor(recorder, now, { executor, calls, turnOptions, context, streaming }) {
    this.#recorder = recorder
    this.#now = now
    this.#began = now()
    this.#calls = calls
    this.#arrived = streaming ? [] : undefined
    this.#head = { version: RECORDING_VERSION, at: this.#began, executor, kind: streaming ? 'streaming' : 'execute', options: turnOptions }
    this.#context = context
  }

  #since() {
    return this.#now() - this.#began
  }

  /** Runs a hook; one that throws drops the recording rather than reach the turn. */
  #hook(work) {
    if (this.#dropped) return
    try {
      work()
    } catch (err) {
      this.#drop('failed', err)
    }
  }

  #drop(why, err) {
    if (this.#dropped) return
    this.#dropped = why
    this.#runs = []
    this.#answers = []
    this.#running.clear()
    if (why === 'failed') this.#recorder.failed(err)
    else this.#recorder.tooLarge()
  }

  /** A streaming turn's call arrived (the turn keeps the call itself). */
  arrived() {
    this.#arrived?.push(this.#since())
  }

  ended() {
    this.#ended ??= this.#since()
  }

  /** The turn was cancelled: by its caller (`reason`, what the caller gave), by the executor's `close()` (`closed`),
   * or before it began (`before`: `reason` is then what the engine was told). */
  cancelled(reason, { closed = false, before = false } = {}) {
    if (this.#cancelled !== undefined) return
    this.#cancelled = { atMs: this.#since(), reason }
    if (closed) this.#cancelled.closed = true
    if (before) this.#cancelled.before = true
  }

  started(run, index, attempt) {
    this.#hook(() => this.#running.set(run, { index, attempt, startMs: this.#since(), progressMs: undefined }))
  }

  /** A run reported progress: when, so that a replay keeps an idle limit at bay as the handler did. Each report
   * counts towards the turn's bound. */
  progressed(run) {
    this.#hook(() => {
      const run_ = this.#running.get(run)
      if (run_ === undefined) return
      const ms = this.#since() - run_.startMs
      ;(run_.progressMs ??= []).push(ms)
      this.#chars += 12
      if (!this.#recorder.fits(this.#chars)) this.#drop('tooLarge')
    })
  }

  /** A run's handler settled: `kind` and `payload` as the engine gets them. Only its end is taken now: the value is
   * kept as it is (a string or bytes the engine also gets, not a copy) and encoded once the turn has ended, so that
   * recording never holds a settlement back. */
  settled(run, kind, payload) {
    this.#hook(() => {
      const run_ = this.#take(run)
      if (run_ === undefined || !(kind === SETTLEMENT_KIND.thrown || kind === SETTLEMENT_KIND.command || RETURNED.has(kind))) return
      this.#keep(run_, kind, payload)
    })
  }

  /** A run the engine stopped (a time limit, a cancellation) before its handler answered. */
  stopped(run) {
    this.#hook(() => {
      const run_ = this.#take(run)
      if (run_ !== undefined) this.#keep(run_, undefined, undefined)
    })
  }

  #take(run) {
    const run_ = this.#running.get(run)
    this.#running.delete(run)
    return run_
  }

  /** A run's end kept: its settlement's `kind` and `payload` (none for a run that gave no answer). Its size counts
   * towards the turn's bound before anything is encoded: a value past it is never copied. */
  #keep({ index, attempt, startMs, progressMs }, kind, payload) {
    const durationMs = this.#since() - startMs
    this.#chars += 100 + (progressMs?.length ?? 0) * 12 + (kind === SETTLEMENT_KIND.binary ? Math.ceil(payload.length / 3) * 4 : payload?.length ?? 0)
    if (!this.#recorder.fits(this.#chars)) return this.#drop('tooLarge')
    this.#runs.push({ index, attempt, startMs, durationMs, progressMs, kind, payload })
  }

  /** A run as its entry holds it. A JSON value the call's result holds as its structure (redacted, as the model read
   * it) is not repeated: that is a successful call's last attempt, in the common case, and it spares the entry both
   * the value and its redaction. */
  #runJson({ index, attempt, startMs, durationMs, progressMs, kind, payload }, results) {
    const progress = progressMs === undefined ? '' : `,"progressMs":[${progressMs.join(',')}]`
    const head = `{"index":${index},"attempt":${attempt},"startMs":${startMs},"durationMs":${durationMs}${progress}`
    switch (kind) {
      case undefined:
        return `${head},"outcome":"none"}`
      case SETTLEMENT_KIND.command:
        return `${head},"outcome":"command"}`
      case SETTLEMENT_KIND.thrown: {
        const error = JSON.parse(payload)
        delete error.stack // where the code lives is not the call's; it could name what should not leave the host
        return `${head},"outcome":"threw","error":${JSON.stringify(error)}}`
      }
      case SETTLEMENT_KIND.json: {
        const r = results[index]
        const held = r?.success && !r.truncated && !r.cached && r.attempts === attempt && r.metadata?.structured !== undefined
        return `${head},"outcome":"returned","valueKind":"json",${held ? '"valueFrom":"result"' : `"value":${payload}`}}`
      }
      case SETTLEMENT_KIND.binary:
        // Bytes that are text are kept as text, which the redaction reads (as the artifact's are); others as base64.
        return isUtf8(payload)
          ? `${head},"outcome":"returned","valueKind":"binary","text":${JSON.stringify(payload.toString('utf8'))}}`
          : `${head},"outcome":"returned","valueKind":"binary","value":${JSON.stringify(payload.toString('base64'))}}`
      default:
        return `${head},"outcome":"returned","valueKind":"${kind}","value":${kind === SETTLEMENT_KIND.none ? 'null' : JSON.stringify(payload)}}`
    }
  }

  /** The application was asked for a call's check, cost or approval (`kind`): its answer, or that none came, is
   * recorded. */
  asked(index, kind) {
    this.#hook(() => this.#asked.set(`${kind}\u0001${index}`, this.#now()))
  }

  /** What the application answered for a call (`kind`: check, cost or approve). */
  answered(index, kind, answer) {
    this.#hook(() => {
      const key = `${kind}\u0001${index}`
      const askedAt = this.#asked.get(key)
      if (askedAt === undefined) return
      this.#asked.delete(key)
      this.#answers.push({ index, kind, atMs: askedAt - this.#began, durationMs: this.#now() - askedAt, answer })
    })
  }

  /** The turn's results: its entry written. Never throws: a context field `include` names may not be JSON. */
  finish(results) {
    if (this.#dropped) return
    try {
      this.#write(results)
    } catch (err) {
      this.#recorder.failed(err)
    }
  }

  #write(results) {
    for (const run of this.#running.keys()) this.stopped(run)
    if (this.#dropped) return
    // What was asked and never answered while the turn ran (the gate's time limit answered for it).
    for (const [key, askedAt] of this.#asked) {
      const [kind, index] = key.split('\u0001')
      this.#answers.push({ index: Number(index), kind, atMs: askedAt - this.#began, unanswered: true })
    }
    /** @type {Record<string, unknown>} */
    const head = { ...this.#head }
    if (this.#arrived) Object.assign(head, { arrivedMs: this.#arrived, endedMs: this.#ended })
    if (this.#cancelled) head.cancelled = this.#cancelled
    head.answers = this.#answers
    const text = JSON.stringify(head, bigintToString)
    // A context field `include` names may be anything; a call is as it came (a hole in the list is a call too); the
    // runs' values are as their handlers gave them.
    const context = this.#context === undefined ? '' : `,"context":${jsonOf(this.#context, 'a context')}`
    const calls = Array.from(this.#calls, (call) => jsonOf(call, 'a call'))
    const runs = this.#runs.map((run) => this.#runJson(run, results))
    this.#recorder.write(`${text.slice(0, -1)}${context},"runs":[${runs.join(',')}]}`, `[${calls.join(',')}]`, results)
  }
}

module.exports = { Recorder, RECORDING_VERSION, readRecordOptions }
