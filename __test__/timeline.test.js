'use strict'
// renderTimeline: the page is one self-contained document, each phase is derived from the marks, timings and starts
// and drawn where its time says, and nothing from a result reaches the page unescaped. Read from the HTML itself,
// no browser needed (scripts/timeline-screenshot.js looks at it in one).

const { describe, it } = require('node:test')
const assert = require('node:assert/strict')
const { renderTimeline } = require('../lib/timeline.js')
const { result } = require('../scripts/timeline-screenshot.js')

const STARTED_AT = Date.UTC(2025, 0, 15, 9, 30, 0)
const ADMITTED = [['lookup:found', 0], ['parse:ok', 0], ['validate:ok', 0], ['permission:allowed', 0]]

/** A traced result: marks as [mark, ms since the turn began], with the handler starts in `fields.starts`. */
const traced = (callId, marks, { name = 'tool', ...fields } = {}) => result(callId, name, marks, fields)

const failure = (errorKind, error = `${errorKind} happened`) => ({ success: false, errorKind, error })

/** The rows of a page by call id: each drawn segment or marker, in order, and the outcome shown at the row's end. */
function rowsOf(html) {
  const rows = new Map()
  for (const [, callId, body] of html.matchAll(/<div class="row" data-call="([^"]*)">([\s\S]*?)\n<\/div>/g)) {
    const parts = [...body.matchAll(/<div class="([^"]*)" data-phase="([^"]*)" style="left:([\d.]+)%(?:;width:([\d.]+)%)?" title="([^"]*)"/g)]
      .map(([, cls, phase, left, width, title]) => ({ cls, phase, left: Number(left), width: width === undefined ? undefined : Number(width), title }))
    const [, outcomeClass, outcome] = body.match(/<div class="outcome t-(\w+)">([^<]*)/)
    rows.set(callId, { parts, outcomeClass, outcome })
  }
  return rows
}

/** The one part of `phase` in a row (fails when there are none or several). */
function only(row, phase) {
  const found = row.parts.filter((p) => p.phase === phase)
  assert.equal(found.length, 1, `one "${phase}" in ${JSON.stringify(row.parts.map((p) => p.phase))}`)
  return found[0]
}

const phases = (row) => row.parts.map((p) => p.phase)

/** A 1000 ms turn with one call for each phase, so that every position in % is a tenth of its ms. */
function everyPhase() {
  return [
    traced('approval', [...ADMITTED.slice(0, 3), ['permission:asked', 100], ['approval:approved', 300], ['invoke:returned', 400]], { starts: [300] }),
    traced('check', [...ADMITTED.slice(0, 2), ['validate:ok', 50], ['check:ok', 150], ['permission:allowed', 150], ['invoke:returned', 200]], { starts: [150] }),
    traced('token', [...ADMITTED, ['rate_limit:waited', 20], ['invoke:returned', 300]], { starts: [220] }),
    traced('retry', [...ADMITTED, ['invoke:failed', 100], ['normalize:error', 100], ['retry:scheduled', 100], ['invoke:returned', 500]], {
      starts: [0, 350], attemptErrors: [{ attempt: 1, errorKind: 'handler_error', error: 'HTTP 503', retryInMs: 250 }],
    }),
    traced('cached', [...ADMITTED, ['cache:hit', 5], ['shape:ok', 5]], { cached: true }),
    traced('joined', [...ADMITTED, ['cache:joined', 10], ['invoke:shared', 410]]),
    traced('refused', [['lookup:found', 0], ['permission:permission_denied', 30]], failure('permission_denied')),
    traced('timeout', [...ADMITTED, ['invoke:timeout', 1000]], { starts: [0], ...failure('timeout') }),
    traced('broken', [...ADMITTED, ['invoke:failed', 250]], { starts: [50], ...failure('handler_error') }),
    traced('cancelled', [...ADMITTED, ['invoke:not_started', 600]], failure('cancelled')),
  ]
}

describe('renderTimeline', () => {
  it('renders one complete, self-contained HTML document', () => {
    const html = renderTimeline(everyPhase())
    assert.match(html, /^<!DOCTYPE html>\n<html lang="en">/)
    assert.ok(html.trimEnd().endsWith('</html>'))
    assert.equal(html.match(/<html\b/g).length, 1)
    assert.equal(html.match(/<\/html>/g).length, 1)
    assert.match(html, /<meta charset="utf-8">/)
    assert.match(html, /<title>toolgate turn<\/title>/)
    assert.match(html, /<style>/)
    for (const external of ['<script', 'http', '<link', '<img', 'src=', 'url(', '@import']) {
      assert.ok(!html.includes(external), `no ${external}`)
    }
    assert.match(html, /10 calls · began 2025-01-15T09:30:00\.000Z · total 1000 ms/)
    assert.equal(rowsOf(html).size, 10)
  })

  it('draws each phase where its marks put it', () => {
    const rows = rowsOf(renderTimeline(everyPhase()))

    const approval = rows.get('approval')
    assert.deepEqual(phases(approval), ['queued', 'waiting for approval', 'running'])
    assert.deepEqual(only(approval, 'queued'), { ...only(approval, 'queued'), left: 0, width: 10 })
    assert.equal(only(approval, 'waiting for approval').left, 10)
    assert.equal(only(approval, 'waiting for approval').width, 20)
    assert.match(only(approval, 'waiting for approval').title, /start 100 ms · 200 ms · approval:approved/)
    assert.equal(only(approval, 'running').left, 30)
    assert.equal(only(approval, 'running').width, 10)

    const check = only(rows.get('check'), 'checking')
    assert.equal(check.left, 5)
    assert.equal(check.width, 10)
    assert.equal(check.cls, 'seg p-checking')

    const token = only(rows.get('token'), 'waiting for token')
    assert.equal(token.left, 2)
    assert.equal(token.width, 20)
    assert.equal(only(rows.get('token'), 'running').left, 22)

    const joined = only(rows.get('joined'), 'waiting for identical call')
    assert.equal(joined.left, 1)
    assert.equal(joined.width, 40)
    assert.ok(!phases(rows.get('joined')).includes('running'))
  })

  it('draws each attempt of a retried call, with its backoff between them', () => {
    const row = rowsOf(renderTimeline(everyPhase())).get('retry')
    assert.deepEqual(phases(row), ['running', 'retrying', 'running'])
    const [first, backoff, second] = row.parts
    assert.deepEqual([first.left, first.width], [0, 10])
    assert.deepEqual([backoff.left, backoff.width], [10, 25])
    assert.deepEqual([second.left, second.width], [35, 15])
    assert.equal(first.cls, 'seg o-ok failed')
    assert.equal(second.cls, 'seg o-ok')
    assert.match(first.title, /attempt 1 of 2 · invoke:failed · handler_error: HTTP 503/)
    assert.match(backoff.title, /retry in 250 ms after handler_error/)
    assert.deepEqual([row.outcome, row.outcomeClass], ['ok ', 'ok'])
  })

  it('ends a backoff where a rate-limit wait before the next attempt begins', () => {
    const html = renderTimeline([traced('r', [
      ...ADMITTED, ['invoke:failed', 100], ['retry:scheduled', 100], ['rate_limit:waited', 200], ['invoke:returned', 400],
    ], { starts: [0, 300] })])
    const row = rowsOf(html).get('r')
    assert.deepEqual(phases(row), ['running', 'retrying', 'waiting for token', 'running'])
    assert.deepEqual(row.parts.map((p) => [p.left, p.width]), [[0, 25], [25, 25], [50, 25], [75, 25]])
  })

  it('marks calls that never ran: cached, refused and cancelled', () => {
    const rows = rowsOf(renderTimeline(everyPhase()))

    const cached = rows.get('cached')
    assert.deepEqual(phases(cached), ['queued', 'cached'])
    assert.equal(only(cached, 'cached').left, 0.5)
    assert.equal(only(cached, 'cached').width, undefined)
    assert.equal(only(cached, 'cached').cls, 'mark o-cached')
    assert.deepEqual([cached.outcome, cached.outcomeClass], ['cached', 'cached'])

    const refused = rows.get('refused')
    assert.deepEqual(phases(refused), ['queued', 'refused'])
    assert.equal(only(refused, 'queued').width, 3)
    assert.equal(only(refused, 'refused').left, 3)
    assert.equal(only(refused, 'refused').cls, 'mark o-refused')
    assert.match(renderTimeline(everyPhase()), /title="refused · at 30 ms · permission_denied · permission_denied happened"><span>permission_denied<\/span>/)
    assert.deepEqual([refused.outcome, refused.outcomeClass], ['permission_denied', 'refused'])

    const cancelled = rows.get('cancelled')
    assert.deepEqual(phases(cancelled), ['queued', 'not started'])
    assert.equal(only(cancelled, 'queued').width, 60)
    assert.equal(only(cancelled, 'not started').cls, 'mark o-stopped')
  })

  it('colours running segments by the final outcome', () => {
    const rows = rowsOf(renderTimeline(everyPhase()))
    assert.equal(only(rows.get('approval'), 'running').cls, 'seg o-ok')
    assert.equal(only(rows.get('timeout'), 'running').cls, 'seg o-timeout')
    assert.equal(only(rows.get('timeout'), 'running').width, 100)
    assert.equal(only(rows.get('broken'), 'running').cls, 'seg o-error')
    assert.deepEqual([rows.get('broken').outcome, rows.get('broken').outcomeClass], ['handler_error', 'error'])
    assert.deepEqual([rows.get('timeout').outcome, rows.get('timeout').outcomeClass], ['timeout', 'timeout'])
  })

  it('places segments in proportion to time on a shared axis', () => {
    const html = renderTimeline([
      traced('half', [...ADMITTED, ['invoke:returned', 100]], { starts: [0] }),
      traced('whole', [...ADMITTED, ['invoke:returned', 200]], { starts: [0] }),
      traced('late', [...ADMITTED, ['invoke:returned', 200]], { starts: [150] }),
    ])
    const rows = rowsOf(html)
    assert.deepEqual(phases(rows.get('half')), ['running'])
    assert.deepEqual([only(rows.get('half'), 'running').left, only(rows.get('half'), 'running').width], [0, 50])
    assert.deepEqual([only(rows.get('whole'), 'running').left, only(rows.get('whole'), 'running').width], [0, 100])
    assert.deepEqual([only(rows.get('late'), 'queued').left, only(rows.get('late'), 'queued').width], [0, 75])
    assert.deepEqual([only(rows.get('late'), 'running').left, only(rows.get('late'), 'running').width], [75, 25])
    assert.match(html, /<div class="outcome">total 200 ms<\/div>/)
    // Round ticks across the axis: 0, 50, … 200 ms.
    assert.match(html, /<span style="left:0%">0 ms<\/span><span style="left:25%">50 ms<\/span><span style="left:50%">100 ms<\/span>/)
    assert.match(html, /<span class="end" style="left:100%">200 ms<\/span>/)
  })

  it('falls back to queuedMs and latencyMs for results traced without timings', () => {
    const ran = {
      ...traced('ran', [['lookup:found', 0], ['invoke:returned', 200]], { starts: [50] }),
      metadata: { startedAt: STARTED_AT, queuedMs: 50, stages: ['lookup:found', 'invoke:returned'] },
      latencyMs: 150,
    }
    const refused = {
      ...traced('bad', [['lookup:unknown_tool', 0]], failure('unknown_tool')),
      metadata: { startedAt: STARTED_AT, stages: ['lookup:unknown_tool'] },
    }
    const rows = rowsOf(renderTimeline([ran, refused]))
    assert.deepEqual(rows.get('ran').parts.map((p) => [p.phase, p.left, p.width]), [['queued', 0, 25], ['running', 25, 75]])
    assert.deepEqual(rows.get('bad').parts.map((p) => [p.phase, p.left]), [['refused', 0]])
    assert.equal(rows.get('bad').outcome, 'unknown_tool')
  })

  it('escapes everything that comes from the results and the title', () => {
    const hostile = {
      ...traced('"><img src=x onerror=alert(1)>', [['lookup:unknown_tool', 0]], failure('unknown_tool', '</title><script>steal()</script>')),
      name: '<script>alert(1)</script>',
    }
    const html = renderTimeline([hostile], { title: '<b>turn</b> & "more"' })
    assert.ok(!html.includes('<script'))
    assert.ok(!html.includes('<img'))
    assert.ok(!html.includes('<b>turn'))
    assert.match(html, /<b>&lt;script&gt;alert\(1\)&lt;\/script&gt;<\/b>/)
    assert.match(html, /data-call="&quot;&gt;&lt;img src=x onerror=alert\(1\)&gt;"/)
    assert.match(html, /&lt;\/title&gt;&lt;script&gt;steal\(\)&lt;\/script&gt;/)
    assert.match(html, /<title>&lt;b&gt;turn&lt;\/b&gt; &amp; &quot;more&quot;<\/title>/)
    assert.equal(rowsOf(html).size, 1)
  })

  it('renders a page that says so when the turn had no calls', () => {
    const html = renderTimeline([])
    assert.match(html, /^<!DOCTYPE html>/)
    assert.match(html, /No tool calls in this turn\./)
    assert.match(html, /0 calls · total 0 ms/)
    assert.ok(!html.includes('class="row"'))
  })
})
