'use strict'
// Renders one turn's ToolResults as a self-contained HTML timeline: one row per call on a shared time axis (ms since
// the turn began), split into the phases its stage marks, timings and handler starts show. Plain HTML/CSS bars with
// inline styles, so the page needs no script, font, image or network to be read and can travel as one file.

const { PHASES, PHASE_CLASS, OUTCOMES, outcomeClass, outcomeLabel } = require('./legend.js')

/** Error kinds that a station gives before any handler runs: drawn as a marker where the call was turned away. */
const REFUSALS = new Set(['unknown_tool', 'invalid_arguments', 'permission_denied', 'approval_denied', 'rate_limited', 'duplicate', 'unavailable', 'budget_exceeded'])
/** Error text in a hover title is cut here: a title is a hint, the full error is in the result. */
const DETAIL_CHARS = 300

const ENTITIES = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }
const esc = (value) => String(value).replace(/[&<>"']/g, (c) => ENTITIES[c])

const finite = (value) => (typeof value === 'number' && Number.isFinite(value) ? value : undefined)

/** `12 ms`, `3.5 ms`, `1250 ms`: one decimal only where it matters. */
function fmt(ms) {
  return `${ms >= 100 ? Math.round(ms) : Math.round(ms * 10) / 10} ms`
}

const clip = (text) => (text.length > DETAIL_CHARS ? `${text.slice(0, DETAIL_CHARS)}…` : text)

/** The error an attempt (1-based) ended with: from attemptErrors for retried ones, the result's own for the last. */
function attemptError(result, attempt, last) {
  const failed = (result.metadata.attemptErrors || []).find((e) => e.attempt === attempt)
  if (failed) return `${failed.errorKind}: ${failed.error}`
  return last && !result.success ? `${result.errorKind}: ${result.error || ''}` : ''
}

/** The marker of a call that never ran a handler and failed: where it was turned away, with its errorKind. */
function notRunMarker(result, at) {
  const kind = String(result.errorKind || 'error')
  const phase = REFUSALS.has(kind) ? 'refused' : 'not started'
  return { phase, at, label: kind, detail: clip(String(result.error || '')) }
}

/**
 * The phases of a call traced with `timings`. Marks come in the order the call met them; `starts` says when each
 * attempt's handler began. Waits that end when a handler starts (rate-limit token, backoff) stay open until the next
 * start, or until another such wait begins, so the two never overlap.
 */
function tracedPhases(result, stages, timings) {
  const meta = result.metadata
  const starts = Array.isArray(meta.starts) ? meta.starts.filter((s) => finite(s) !== undefined)
    : finite(meta.queuedMs) !== undefined ? [meta.queuedMs] : []
  const end = Math.max(0, ...timings)
  const segments = []
  const markers = []
  let attempt = 0
  let waiting = null
  let previous = 0
  let askedAt
  let joinedAt
  const closeWait = (at) => {
    if (waiting) segments.push({ ...waiting, end: Math.max(at, waiting.start) })
    waiting = null
  }
  stages.forEach((mark, i) => {
    const t = timings[i]
    const [station] = String(mark).split(':')
    const inAttempt = attempt < starts.length && starts[attempt] <= t
    if (inAttempt) closeWait(starts[attempt])
    if (inAttempt && (station === 'invoke' || mark === 'retry:scheduled')) {
      const last = attempt === starts.length - 1
      const error = attemptError(result, attempt + 1, last)
      segments.push({
        phase: 'running', start: starts[attempt], end: t, failedAttempt: !last && error !== '',
        detail: `attempt ${attempt + 1} of ${starts.length} · ${mark}${error ? ` · ${clip(error)}` : ''}`,
      })
      attempt++
    }
    if (mark === 'retry:scheduled') {
      closeWait(t)
      const failed = (meta.attemptErrors || []).find((e) => e.attempt === attempt)
      const detail = failed ? `retry in ${failed.retryInMs} ms after ${failed.errorKind}` : mark
      waiting = { phase: 'retrying', start: t, detail }
    } else if (mark === 'rate_limit:waited') {
      closeWait(t)
      waiting = { phase: 'waiting for token', start: t, detail: 'waiting for a rate-limit token' }
    } else if (station === 'check' || station === 'schema') {
      // A schema's own validation and the tool's check run in JS right after the engine's validation, one after
      // the other: the gap since the previous mark is each one's run time.
      segments.push({ phase: 'checking', start: previous, end: t, detail: mark })
    } else if (mark === 'permission:asked') {
      askedAt = t
    } else if (station === 'approval' && askedAt !== undefined) {
      segments.push({ phase: 'waiting for approval', start: askedAt, end: t, detail: mark })
    } else if (mark === 'cache:joined') {
      joinedAt = t
    } else if (mark === 'invoke:shared' && joinedAt !== undefined) {
      segments.push({ phase: 'waiting for identical call', start: joinedAt, end: t, detail: 'cache:joined → invoke:shared' })
    } else if (mark === 'cache:hit' || mark === 'dedup:reused') {
      markers.push({ phase: 'cached', at: t, label: 'cached', detail: mark })
    }
    previous = t
  })
  closeWait(attempt < starts.length ? starts[attempt] : end)
  if (starts.length === 0 && !result.success && !result.cached) markers.push(notRunMarker(result, end))
  return { segments: withQueued(segments, starts.length ? starts[0] : end), markers, end }
}

/** Without timings only queuedMs and latencyMs are known: one queued segment, then one running segment. */
function untracedPhases(result) {
  const queuedMs = finite(result.metadata.queuedMs)
  if (queuedMs === undefined) {
    const markers = result.cached ? [{ phase: 'cached', at: 0, label: 'cached', detail: 'cache:hit' }]
      : result.success ? [] : [notRunMarker(result, 0)]
    return { segments: [], markers, end: 0 }
  }
  const end = queuedMs + (finite(result.latencyMs) || 0)
  const error = attemptError(result, result.attempts, true)
  const running = {
    phase: 'running', start: queuedMs, end,
    detail: `${result.attempts} attempt${result.attempts === 1 ? '' : 's'}${error ? ` · ${clip(error)}` : ''}`,
  }
  return { segments: withQueued([running], queuedMs), markers: [], end }
}

/** Fills the time before the first handler start (or the end, for calls that never ran) that no wait covers. */
function withQueued(segments, until) {
  const queued = []
  let cursor = 0
  for (const s of [...segments].sort((a, b) => a.start - b.start)) {
    if (s.start >= until) break
    if (s.start > cursor) queued.push({ phase: 'queued', start: cursor, end: s.start, detail: 'waiting to start' })
    cursor = Math.max(cursor, s.end)
  }
  if (cursor < until) queued.push({ phase: 'queued', start: cursor, end: until, detail: 'waiting to start' })
  return [...queued, ...segments].sort((a, b) => a.start - b.start)
}

/** The phases of one call, from its trace when it has one. */
function phasesOf(result) {
  const stages = Array.isArray(result.metadata.stages) ? result.metadata.stages : []
  const timings = result.metadata.timings
  const traced = Array.isArray(timings) && timings.length === stages.length && timings.every((t) => finite(t) !== undefined)
  return traced ? tracedPhases(result, stages, timings) : untracedPhases(result)
}

/** A round tick step giving about `count` ticks over `total`. */
function tickStep(total, count) {
  const raw = total / count
  const magnitude = 10 ** Math.floor(Math.log10(raw))
  return [1, 2, 5, 10].find((f) => f * magnitude >= raw) * magnitude
}

const pct = (ms, total) => `${+(ms / total * 100).toFixed(3)}%`

function renderSegment(s, kind, total) {
  const running = s.phase === 'running'
  const cls = running ? `seg o-${kind}${s.failedAttempt ? ' failed' : ''}` : `seg p-${PHASE_CLASS[s.phase]}`
  const title = `${s.phase} · start ${fmt(s.start)} · ${fmt(s.end - s.start)} · ${s.detail}`
  return `<div class="${cls}" data-phase="${s.phase}" style="left:${pct(s.start, total)};width:${pct(s.end - s.start, total)}" title="${esc(title)}"></div>`
}

function renderMarker(m, kind, total) {
  // A reused result is blue whatever the call's flags say; a call turned away takes its outcome's colour.
  const cls = m.phase === 'cached' ? 'cached' : kind
  // Labels past 70% of the axis go on the marker's left, where there is room.
  const flip = m.at / total > 0.7 ? ' flip' : ''
  const title = `${m.phase} · at ${fmt(m.at)} · ${m.label}${m.detail ? ` · ${m.detail}` : ''}`
  return `<div class="mark o-${cls}${flip}" data-phase="${m.phase}" style="left:${pct(m.at, total)}" title="${esc(title)}"><span>${esc(m.label)}</span></div>`
}

function renderRow(row, total) {
  const { result, segments, markers } = row
  const kind = outcomeClass(result)
  const attempts = result.attempts > 1 ? ` <small>×${esc(result.attempts)}</small>` : ''
  const name = `${result.name} · ${result.callId}`
  return `<div class="row" data-call="${esc(result.callId)}">
<div class="name" title="${esc(name)}"><b>${esc(result.name)}</b> <small>${esc(result.callId)}</small></div>
<div class="track">${segments.map((s) => renderSegment(s, kind, total)).join('')}${markers.map((m) => renderMarker(m, kind, total)).join('')}</div>
<div class="outcome t-${kind}">${esc(outcomeLabel(result))}${attempts}</div>
</div>`
}

function renderAxis(total, turnMs) {
  const step = tickStep(total, 8)
  const ticks = []
  for (let ms = 0; ms <= total + step / 1e6; ms += step) ticks.push(ms)
  // A label near the right edge ends at its tick, clear of the total beside the axis.
  const labels = ticks.map((ms) => `<span${ms / total > 0.93 ? ' class="end"' : ''} style="left:${pct(ms, total)}">${fmt(ms)}</span>`).join('')
  const lines = ticks.map((ms) => `<i style="left:${pct(ms, total)}"></i>`).join('')
  return {
    axis: `<div class="row axis"><div class="name">ms since turn start</div><div class="track">${labels}</div><div class="outcome">total ${fmt(turnMs)}</div></div>`,
    grid: `<div class="grid">${lines}</div>`,
  }
}

function renderLegend() {
  const item = (fill, label) => `<span><i style="background:${fill}"></i>${label}</span>`
  const waits = PHASES.map(([, , label, fill]) => item(fill, label))
  const outcomes = OUTCOMES.map(([, label, color]) => item(color, label))
  const retried = '<span><i class="seg o-ok failed"></i>attempt that failed and was retried</span>'
  return `<div class="legend"><b>phases</b>${waits.join('')}</div><div class="legend"><b>outcome</b>${outcomes.join('')}${retried}</div>`
}

const CSS = `
:root { --label: 250px; --outcome: 150px }
* { box-sizing: border-box }
body { margin: 0; padding: 18px 24px; background: #fff; color: #1f2328;
  font: 12px/1.4 ui-monospace, "DejaVu Sans Mono", Menlo, Consolas, monospace }
h1 { margin: 0; font-size: 15px }
.sub { margin: 2px 0 10px; color: #656d76 }
.legend { display: flex; flex-wrap: wrap; gap: 4px 14px; margin-bottom: 6px; color: #424a53 }
.legend b { min-width: 64px; color: #1f2328 }
.legend span { display: inline-flex; align-items: center; gap: 6px }
.legend i { position: static; display: inline-block; width: 16px; height: 10px; border-radius: 2px }
.chart { position: relative; margin-top: 12px; border-top: 1px solid #d0d7de; border-bottom: 1px solid #d0d7de }
.row { position: relative; display: grid; grid-template-columns: var(--label) 1fr var(--outcome); align-items: center; height: 24px }
.row:nth-child(odd) { background: rgba(175, 184, 193, 0.12) }
.name { overflow: hidden; padding: 0 10px 0 4px; white-space: nowrap; text-overflow: ellipsis }
.name small, .outcome small { color: #656d76; font-weight: normal }
.track { position: relative; height: 14px }
.seg { position: absolute; top: 0; bottom: 0; border-radius: 2px }
.seg.o-ok, .seg.o-error, .seg.o-timeout, .seg.o-stopped, .seg.o-refused { min-width: 2px; top: -1px; bottom: -1px }
.seg.failed { box-shadow: inset -3px 0 0 #82071e }
.mark { position: absolute; top: -3px; bottom: -3px; width: 4px; margin-left: -2px; border-radius: 2px }
.mark span { position: absolute; left: 8px; top: 2px; font-size: 11px; white-space: nowrap }
.mark.flip span { left: auto; right: 8px }
.outcome { padding-left: 12px; font-weight: bold; white-space: nowrap; overflow: hidden; text-overflow: ellipsis }
.axis { height: 22px; background: none !important; color: #656d76 }
.axis .name, .axis .outcome { font-weight: normal }
.axis .track span { position: absolute; top: -1px; transform: translateX(-50%); white-space: nowrap }
.axis .track span:first-child { transform: none }
.axis .track span.end { transform: translateX(-100%) }
.grid { position: absolute; top: 0; bottom: 0; left: var(--label); right: var(--outcome); pointer-events: none }
.grid i { position: absolute; top: 0; bottom: 0; border-left: 1px solid rgba(140, 149, 159, 0.3) }
.empty { padding: 24px 4px; color: #656d76 }
${PHASES.map(([, cls, , fill]) => `.p-${cls} { background: ${fill} }`).join('\n')}
${OUTCOMES.map(([cls, , color]) => `.o-${cls} { background: ${color} } .o-${cls} span, .t-${cls} { color: ${color} }`).join('\n')}
`

/**
 * One turn's results as a self-contained HTML page: a bar per call on a shared axis of ms since the turn began.
 * @param {import('./index').ToolResult[]} results
 * @param {{ title?: string }} [options]
 * @returns {string}
 */
function renderTimeline(results, options = {}) {
  const title = options.title === undefined ? 'toolgate turn' : String(options.title)
  const list = Array.isArray(results) ? results : []
  const rows = list.map((r) => {
    const result = { ...r, metadata: r.metadata || {} }
    return { result, ...phasesOf(result) }
  })
  const turnMs = Math.max(0, ...rows.flatMap((r) => [r.end, ...r.segments.map((s) => s.end), ...r.markers.map((m) => m.at)]))
  // A turn where nothing took time still needs a scale: everything then sits at 0.
  const total = turnMs > 0 ? turnMs : 1
  const began = new Date(rows.length ? finite(rows[0].result.metadata.startedAt) ?? NaN : NaN)
  const sub = [
    `${list.length} call${list.length === 1 ? '' : 's'}`,
    Number.isNaN(began.getTime()) ? '' : `began ${began.toISOString()}`,
    `total ${fmt(turnMs)}`,
  ]
  let body
  if (rows.length === 0) {
    body = '<div class="empty">No tool calls in this turn.</div>'
  } else {
    const { axis, grid } = renderAxis(total, turnMs)
    body = `${renderLegend()}<div class="chart">${grid}${axis}\n${rows.map((row) => renderRow(row, total)).join('\n')}</div>`
  }
  return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>${esc(title)}</title>
<style>${CSS}</style>
</head>
<body>
<h1>${esc(title)}</h1>
<div class="sub">${sub.filter(Boolean).join(' · ')}</div>
${body}
</body>
</html>
`
}

module.exports = { renderTimeline }
