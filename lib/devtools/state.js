'use strict'
// What the devtools page knows of the turns it watched: the server keeps it (for a page that opens later or
// reloads) and the page keeps its own copy from the same events. One file serves both: Node requires it, the page
// loads it as a script. Everything kept is capped, so that a page left open holds a bounded amount per turn.
;(function define(root, make) {
  if (typeof module === 'object' && module.exports) module.exports = make()
  else root.toolgateState = make()
})(this, () => {
  const CAPS = {
    /** Calls kept per turn; later ones are counted. */
    callsPerTurn: 500,
    /** Calls kept in all: past it, the oldest turns are forgotten (as past `keepTurns`). */
    calls: 10_000,
    /** Events kept per call (stations, starts, questions); later ones are counted. */
    eventsPerCall: 200,
    /** Arguments and errors, as JSON text. */
    textChars: 4 * 1024,
    /** The output the model read (a long one's artifact has it whole). */
    outputChars: 8 * 1024,
    /** A result's metadata, as JSON text: past this, only the parts the page explains are kept. */
    metadataChars: 8 * 1024,
  }

  const clip = (text, max) => (text.length > max ? `${text.slice(0, max)}… (${text.length - max} more characters not kept)` : text)

  function textOf(value, max = CAPS.textChars) {
    if (value === undefined) return undefined
    let text
    try {
      text = typeof value === 'string' ? value : JSON.stringify(value)
    } catch {
      text = String(value)
    }
    return clip(text ?? String(value), max)
  }

  /** Whether a value's JSON would pass about `max` characters, found without writing it: a walk that stops once
   * it does. */
  function larger(value, max) {
    let left = max
    const walk = (v) => {
      if (left < 0) return
      if (typeof v === 'string') left -= v.length + 2
      else if (v === null || typeof v !== 'object') left -= 8
      else for (const key of Object.keys(v)) {
        left -= key.length + 4
        walk(v[key])
      }
    }
    walk(value)
    return left < 0
  }

  /** Metadata parts the page explains, kept whatever the size of the rest. */
  const EXPLAINED = ['permission', 'repairs', 'attemptErrors', 'sharedFlight', 'reused', 'repeats', 'redactions', 'artifactPath', 'binary', 'originalChars', 'budget', 'store', 'storeError', 'queuedMs', 'startedAt', 'stages', 'command']

  /** A result as the page keeps it: the model's text capped, metadata without what only the application reads (the
   * stack, the value again, image data, timings). */
  function compactResult(result) {
    const { stack, structured, images, timings, starts, ...metadata } = result.metadata ?? {}
    if (images) metadata.images = images.map((image) => ({ mediaType: image.mediaType, base64Chars: String(image.data ?? '').length }))
    let kept = metadata
    let metadataCut = false
    if (larger(metadata, CAPS.metadataChars)) {
      kept = Object.fromEntries(EXPLAINED.filter((key) => metadata[key] !== undefined).map((key) => [key, metadata[key]]))
      if (larger(kept, CAPS.metadataChars)) kept = { metadata: textOf(kept, CAPS.metadataChars) }
      metadataCut = true
    }
    return {
      callId: String(result.callId ?? ''),
      name: String(result.name ?? ''),
      success: result.success === true,
      output: clip(String(result.output ?? ''), CAPS.outputChars),
      error: result.error === undefined ? undefined : clip(String(result.error), CAPS.textChars),
      errorKind: result.errorKind,
      attempts: result.attempts,
      cached: result.cached === true,
      truncated: result.truncated === true,
      metadata: kept,
      metadataCut,
    }
  }

  /** An event as the page is sent it: values as text, capped. */
  function compact(event) {
    if (event.type === 'call') return { ...event, callId: clip(String(event.callId), 200), args: textOf(event.args) }
    if (event.type === 'start' && event.args !== undefined) return { ...event, args: textOf(event.args) }
    if (event.type === 'result') return { ...event, result: compactResult(event.result) }
    return event
  }

  function create({ keepTurns }) {
    return { keepTurns, turns: new Map(), forgotten: 0, calls: 0 }
  }

  /** Forgets the oldest turns past `keepTurns` or past the calls kept in all (the newest turn stays). */
  function trim(state) {
    for (const [key, turn] of state.turns) {
      if (state.turns.size <= 1 || (state.turns.size <= state.keepTurns && state.calls <= CAPS.calls)) break
      state.turns.delete(key)
      state.calls -= turn.calls.filter(Boolean).length
      state.forgotten += 1
    }
  }

  /** Applies compacted events of gate `gate` (its place in the page's list). */
  function apply(state, gate, events) {
    for (const event of events) applyOne(state, gate, event)
  }

  function applyOne(state, gate, event) {
    const key = `${gate}/${event.turn}`
    if (event.type === 'turn') {
      state.turns.set(key, { key, gate, turn: event.turn, at: event.at, streaming: event.streaming, done: undefined, unfollowed: undefined, calls: [], callsNotKept: 0 })
      trim(state)
      return
    }
    const turn = state.turns.get(key)
    if (turn === undefined) return
    if (event.type === 'done') {
      turn.done = event.at
      return
    }
    if (event.type === 'call') {
      if (event.index >= CAPS.callsPerTurn) {
        turn.callsNotKept += 1
        return
      }
      if (turn.calls[event.index] === undefined) state.calls += 1
      turn.calls[event.index] = {
        index: event.index, callId: event.callId, name: event.name, args: event.args, received: undefined,
        // A streaming turn's call counts its stations from when it came; a whole turn's, from the turn's start.
        origin: turn.streaming ? event.at ?? turn.at : turn.at,
        stations: [], starts: [], asks: [], eventsNotKept: 0, sealed: undefined, result: undefined,
      }
      trim(state)
      return
    }
    const call = turn.calls[event.index]
    if (call === undefined) return
    if (event.type === 'result') {
      call.result = event.result
      return
    }
    if (call.stations.length + call.starts.length + call.asks.length >= CAPS.eventsPerCall) {
      call.eventsNotKept += 1
      if (event.type === 'station' && event.station === 'sealed') call.sealed = { outcome: event.outcome, at: call.origin + event.ms }
      return
    }
    if (event.type === 'station') {
      call.stations.push({ station: event.station, outcome: event.outcome, at: call.origin + event.ms })
      if (event.station === 'sealed') call.sealed = { outcome: event.outcome, at: call.origin + event.ms }
    } else if (event.type === 'start') {
      call.starts.push({ attempt: event.attempt, at: event.at })
      if (event.args !== undefined) call.received = event.args
    } else if (event.type === 'ask') {
      call.asks.push({ kind: event.kind, at: event.at })
    }
  }

  /** Where a mark moves a call: the phase it is in from then on (undefined: it stays where it was). */
  function phaseAfter(station, outcome) {
    if (station === 'permission' && outcome === 'asked') return 'approval'
    if (station === 'rate_limit' && outcome === 'waited') return 'token'
    if (station === 'cache' && outcome === 'joined') return 'joined'
    if (station === 'retry') return 'backoff'
    if (station === 'approval' || station === 'check' || station === 'schema' || station === 'cost') return 'queued'
    return undefined
  }

  /**
   * A call's phases on the page's time axis (epoch ms): [{ phase, from, to }], where phase is one of the timeline's
   * (queued, checking, approval, token, joined, backoff) or running. An open call's last phase runs until `now`.
   */
  function phases(call, now) {
    const points = [{ at: call.origin, phase: 'queued' }]
    for (const ask of call.asks) if (ask.kind !== 'approve') points.push({ at: ask.at, phase: 'checking' })
    for (const start of call.starts) points.push({ at: start.at, phase: 'running' })
    for (const mark of call.stations) {
      const phase = phaseAfter(mark.station, mark.outcome)
      if (phase) points.push({ at: mark.at, phase })
    }
    points.sort((a, b) => a.at - b.at)
    const end = call.sealed?.at ?? now
    const segments = []
    points.forEach((point, i) => {
      const to = Math.min(points[i + 1]?.at ?? end, end)
      const from = Math.min(point.at, end)
      if (to > from || (i === points.length - 1 && segments.length === 0)) segments.push({ phase: point.phase, from, to })
    })
    return segments
  }

  /** Watching stopped: the turns still open will hear nothing more, and are shown as followed until `at`. */
  function unfollow(state, at) {
    for (const turn of state.turns.values()) if (turn.done === undefined) turn.unfollowed ??= at
  }

  /** Every kept turn, in the order they began, as a JSON-ready list (for a page that opens later). */
  function snapshot(state) {
    return { turns: [...state.turns.values()], forgotten: state.forgotten }
  }

  /** A page's copy made from a snapshot. */
  function fromSnapshot({ turns, forgotten }, keepTurns) {
    const state = create({ keepTurns })
    for (const turn of turns) {
      state.turns.set(turn.key, turn)
      state.calls += turn.calls.filter(Boolean).length
    }
    state.forgotten = forgotten
    return state
  }

  return { compact, compactResult, create, apply, phases, unfollow, snapshot, fromSnapshot }
})
