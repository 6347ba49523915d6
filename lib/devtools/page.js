'use strict'
// The devtools page: live turns drawn as the timeline draws a finished one, a call's story, approvals answered
// here, the gates' health, and a recording replayed. Talks only to the server it came from, with its token.
;(() => {
  const { phases, apply, fromSnapshot } = window.toolgateState
  const token = new URLSearchParams(location.search).get('token') ?? ''
  const gateCount = Number(document.body.dataset.gates)
  const legendOf = window.toolgateLegend
  const legend = {
    phases: legendOf.PHASES.map(([phase, cls, label, fill]) => ({ phase, cls, label, fill })),
    outcomes: legendOf.OUTCOMES.map(([cls, label, fill]) => ({ cls, label, fill })),
  }
  const fillOf = Object.fromEntries([...legend.phases.map((p) => [p.cls, p.fill]), ...legend.outcomes.map((o) => [o.cls, o.fill])])
  /** Turns drawn at most (the newest); the server keeps more, up to its keepTurns. */
  const DRAWN_TURNS = 60
  /** Calls drawn per turn at most (every kept one is in the state, and running ones are listed above the turns). */
  const DRAWN_CALLS = 200
  /** A handler running this long is marked as likely hung. */
  const HUNG_MS = 10_000
  let kept = fromSnapshot({ turns: [], forgotten: 0 }, Infinity)
  let approvals = new Map()
  let selected
  let view = 'turns'

  const url = (path, params = {}) => `${path}?${new URLSearchParams({ ...params, token })}`
  const $ = (id) => document.getElementById(id)

  /** An element: `attrs` may hold `class`, `text`, `style` (an object, applied through the DOM: the page's policy
   * allows no inline style), `on` (event handlers) and plain attributes. */
  function h(tag, attrs = {}, ...children) {
    const el = document.createElement(tag)
    for (const [key, value] of Object.entries(attrs)) {
      if (value === undefined || value === false) continue
      if (key === 'class') el.className = value
      else if (key === 'text') el.textContent = value
      else if (key === 'style') Object.assign(el.style, value)
      else if (key === 'on') for (const [type, fn] of Object.entries(value)) el.addEventListener(type, fn)
      else el.setAttribute(key, value === true ? '' : value)
    }
    for (const child of children.flat()) if (child !== undefined && child !== null && child !== false) el.append(child)
    return el
  }

  const fmt = (ms) => (ms >= 10_000 ? `${(ms / 1000).toFixed(1)} s` : ms >= 100 ? `${Math.round(ms)} ms` : `${Math.round(ms * 10) / 10} ms`)
  const when = (epoch) => new Date(epoch).toLocaleTimeString()

  /** The class a call's outcome is drawn in, as the timeline's: from its result, or from how it was sealed while
   * the result is on its way. */
  function outcomeClass(result, sealed) {
    if (result) return legendOf.outcomeClass(result)
    if (!sealed) return undefined
    const { outcome } = sealed
    return legendOf.outcomeClass({ cached: outcome === 'cached', success: outcome === 'ok' || outcome === 'cached', errorKind: outcome })
  }

  const outcomeText = (call, now) => {
    if (call.result) return legendOf.outcomeLabel(call.result)
    if (call.sealed) return call.sealed.outcome
    const started = call.starts.at(-1)
    if (started && !call.stations.some((m) => m.station === 'retry' && m.at > started.at)) return `running ${fmt(now - started.at)}`
    const phase = phases(call, now).at(-1)?.phase
    return legend.phases.find((p) => p.cls === phase)?.label ?? 'waiting'
  }

  // ---- live turns ----------------------------------------------------------------------------------------------

  function drawLegend() {
    const item = (fill, label, cls) => h('span', {}, h('span', { class: `swatch ${cls ?? ''}`, style: { background: fill } }), label)
    $('legend').replaceChildren(
      ...legend.phases.map((p) => item(p.fill, p.label)),
      ...legend.outcomes.map((o) => item(o.fill, o.label)),
      item(undefined, 'running now', 'running-now'),
    )
  }

  function drawTurn(turn, at) {
    // A turn no longer followed is drawn as it was when watching stopped.
    const now = turn.unfollowed ?? at
    const calls = turn.calls.filter(Boolean)
    const drawn = calls.slice(0, DRAWN_CALLS)
    const end = turn.done ?? now
    const last = Math.max(end, ...calls.map((c) => c.sealed?.at ?? now))
    const span = Math.max(last - turn.at, 1)
    const rows = drawn.map((call) => {
      const cls = outcomeClass(call.result, call.sealed)
      const segments = phases(call, now).map((segment) => {
        const running = segment.phase === 'running'
        const live = !call.sealed && segment.to >= now - 1
        return h('div', {
          class: `seg ${running && !cls ? 'running-now' : ''} ${live ? 'live' : ''}`,
          'data-phase': segment.phase,
          title: `${segment.phase}: ${fmt(segment.to - segment.from)}`,
          style: { left: `${((segment.from - turn.at) / span) * 100}%`, width: `${((segment.to - segment.from) / span) * 100}%`, background: running ? (cls ? fillOf[cls] : '') : fillOf[segment.phase] },
        })
      })
      const running = !call.sealed && call.starts.length > 0 ? now - call.starts.at(-1).at : 0
      // A call that never ran is marked where it was answered, in its outcome's colour.
      if (call.sealed && call.starts.length === 0) {
        segments.push(h('div', { class: 'seg marker', title: outcomeText(call, now), style: { left: `calc(${((call.sealed.at - turn.at) / span) * 100}% - 3px)`, background: fillOf[cls] } }))
      }
      return h('div', { class: `row ${selected?.key === turn.key && selected.index === call.index ? 'selected' : ''}`, 'data-index': call.index, on: { click: () => select(turn.key, call.index) } },
        h('span', { class: 'name', text: `${call.index}. ${call.name ?? '(no name)'}`, title: call.callId }),
        h('div', { class: 'track' }, segments),
        h('span', { class: `outcome ${running > HUNG_MS ? 'bad' : cls === 'ok' || cls === 'cached' ? 'ok' : cls ? 'bad' : 'warn'}`, 'data-outcome': outcomeText(call, now), text: outcomeText(call, now) }))
    })
    const notDrawn = calls.length - drawn.length
    const more = [
      notDrawn > 0 ? h('div', { class: 'more', text: `${notDrawn} more calls (the slowest are under "running" above)` }) : undefined,
      turn.callsNotKept > 0 ? h('div', { class: 'more', text: `${turn.callsNotKept} more calls not kept` }) : undefined,
    ]
    return h('div', { class: 'turn', 'data-turn': turn.key },
      h('div', { class: 'head' },
        gateCount > 1 ? h('span', { text: `gate ${turn.gate}` }) : undefined,
        h('b', { text: turn.turn }),
        h('span', { text: when(turn.at) }),
        h('span', { text: `${calls.length} call${calls.length === 1 ? '' : 's'}${turn.streaming ? ' · streaming' : ''}` }),
        turn.done ? h('span', { text: fmt(turn.done - turn.at) })
          : turn.unfollowed ? h('span', { class: 'open-turn', 'data-unfollowed': '', text: `not followed after ${fmt(turn.unfollowed - turn.at)}: no page was open` })
            : h('span', { class: 'open-turn', text: `open ${fmt(now - turn.at)}` })),
      rows, more)
  }

  function drawInFlight(now) {
    const running = []
    for (const turn of kept.turns.values()) {
      if (turn.unfollowed) continue
      for (const call of turn.calls) if (call && !call.sealed && call.starts.length > 0) running.push({ turn, call, ms: now - call.starts.at(-1).at })
    }
    running.sort((a, b) => b.ms - a.ms)
    if (running.length === 0) return $('inflight').replaceChildren(h('span', { class: 'hint', text: 'No handler running.' }))
    $('inflight').replaceChildren(
      h('b', { text: `${running.length} running. ` }), 'Longest: ',
      ...running.slice(0, 5).map(({ turn, call, ms }) => h('a', { href: '#', class: ms > HUNG_MS ? 'hung' : '', on: { click: (e) => { e.preventDefault(); select(turn.key, call.index) } } },
        `${call.name} ${fmt(ms)}${ms > HUNG_MS ? ' (hung?)' : ''}`, ' ')))
  }

  function drawTurns() {
    const now = Date.now()
    const turns = [...kept.turns.values()].slice(-DRAWN_TURNS).reverse()
    $('turn-list').replaceChildren(...(turns.length ? turns.map((t) => drawTurn(t, now)) : [h('p', { class: 'hint', text: 'No turn yet: turns run from now on appear here as they run.' })]))
    drawInFlight(now)
  }

  // ---- a call's story ------------------------------------------------------------------------------------------

  function select(key, index) {
    selected = { key, index }
    $('story').hidden = false
    drawStory()
    if (view === 'turns') drawTurns()
  }

  const section = (title, ...content) => [h('h3', { text: title }), ...content]
  const pre = (text) => h('pre', { text: text ?? '' })
  /** JSON text laid out for reading (the server sends it compact); text cut short or not JSON, as it is. */
  const pretty = (text) => {
    try {
      return JSON.stringify(JSON.parse(text), null, 2)
    } catch {
      return text
    }
  }
  const table = (rows) => h('table', {}, rows.map(([k, v]) => h('tr', {}, h('th', { text: k }), h('td', {}, v))))

  function drawStory() {
    const turn = kept.turns.get(selected?.key)
    const call = turn?.calls[selected.index]
    if (!call) return $('story-body').replaceChildren(h('p', { class: 'hint', text: 'This call is no longer kept.' }))
    const result = call.result
    const meta = result?.metadata ?? {}
    const parts = [h('h2', { text: `${call.name} · ${outcomeText(call, Date.now())}` }), h('div', { class: 'hint', text: `call ${call.callId} · turn ${turn.turn} · #${call.index}` })]
    parts.push(...section('Arguments as the model sent them', pre(pretty(call.args))))
    parts.push(...section('As the handler received them', call.received === undefined ? h('p', { class: 'hint', text: 'No handler ran with them.' }) : pre(pretty(call.received))))
    if (meta.repairs?.length) parts.push(...section('Repairs', h('ul', {}, meta.repairs.map((r) => h('li', { 'data-repair': r.rule, text: `${r.rule}${r.path ? ` at ${r.path}` : ''}${r.before == null && r.after == null ? '' : `: ${JSON.stringify(r.before)} → ${JSON.stringify(r.after)}`}` })))))
    if (result?.errorKind === 'invalid_arguments') parts.push(...section('Validation', pre(result.error)))
    if (meta.permission) parts.push(...section('Permission', table([['decision', meta.permission.decision], ['by', h('span', { 'data-rule': '', text: meta.permission.by })]])))
    const attempts = call.starts.map((s) => {
      const failed = meta.attemptErrors?.find((e) => e.attempt === s.attempt)
      return [`attempt ${s.attempt}`, `${when(s.at)}${failed ? ` · ${failed.errorKind}: ${failed.error} · retried in ${fmt(failed.retryInMs)}` : ''}`]
    })
    if (attempts.length) parts.push(...section('Attempts', table(attempts)))
    const avoided = call.stations.filter((m) => m.station === 'cache' || m.station === 'dedup').map((m) => `${m.station}: ${m.outcome}`)
    if (result?.cached) avoided.push('answered from the cache')
    if (meta.sharedFlight) avoided.push("shared an identical call's run")
    if (meta.reused) avoided.push('the earlier result of the same query, given again')
    if (meta.repeats) avoided.push(`ran ${meta.repeats} times before in this session`)
    if (avoided.length) parts.push(...section('Cache, dedup and flights', h('ul', {}, avoided.map((a) => h('li', { text: a })))))
    if (result) {
      parts.push(...section('What the model read', pre(result.output)))
      const facts = []
      if (meta.redactions) facts.push(['redactions', Object.entries(meta.redactions).map(([rule, n]) => `${rule}: ${n}`).join(', ')])
      if (result.truncated) facts.push(['truncated', `from ${meta.originalChars ?? '?'} characters`])
      for (const [label, file] of [['artifact', meta.artifactPath], ['stdout', meta.command?.stdoutArtifact], ['stderr', meta.command?.stderrArtifact]]) {
        if (file) facts.push([label, h('a', { href: url('/artifact', { path: file }), target: '_blank', rel: 'noopener', text: file })])
      }
      if (meta.budget) facts.push(['budget', JSON.stringify(meta.budget)])
      if (meta.storeError) facts.push(['store', meta.storeError])
      if (meta.queuedMs !== undefined) facts.push(['queued', fmt(meta.queuedMs)])
      if (facts.length) parts.push(...section('Metadata', table(facts)))
    }
    const trace = [
      ...call.stations.map((m) => [m.at, `${m.station}: ${m.outcome}`]),
      ...call.starts.map((s) => [s.at, `handler started (attempt ${s.attempt})`]),
      ...call.asks.map((a) => [a.at, `asked the application: ${a.kind}`]),
    ].sort((a, b) => a[0] - b[0])
    parts.push(...section('Trace', table(trace.map(([at, what]) => [`+${fmt(at - turn.at)}`, what]))))
    if (call.eventsNotKept) parts.push(h('p', { class: 'hint', text: `${call.eventsNotKept} later events not kept` }))
    if (result) parts.push(...section(`All metadata${result.metadataCut ? ' (cut)' : ''}`, pre(JSON.stringify(meta, null, 2))))
    $('story-body').replaceChildren(...parts)
  }

  // ---- approvals -----------------------------------------------------------------------------------------------

  function drawApprovals() {
    const count = approvals.size
    $('approval-count').hidden = count === 0
    $('approval-count').textContent = String(count)
    if (view !== 'approvals') return
    $('approvals-hint').textContent = count ? '' : 'No approval is waiting. With devtools(gate, { approvals: true }), calls that ask for approval wait here as well as on the application.'
    $('approval-list').replaceChildren(...[...approvals.values()].map((a) => {
      const args = h('textarea', { 'aria-label': 'arguments' })
      args.value = a.args
      const reason = h('input', { placeholder: 'reason (optional)', 'aria-label': 'reason' })
      const status = h('span', { class: 'hint' })
      const answer = async (decision, edited) => {
        const body = { id: a.id, decision, reason: reason.value || undefined }
        if (edited) {
          try {
            body.arguments = JSON.parse(args.value)
          } catch (err) {
            status.textContent = `The arguments are not JSON: ${err.message}`
            return
          }
        }
        const res = await fetch(url('/approve'), { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) })
        status.textContent = res.ok ? 'answered' : await res.text()
      }
      return h('div', { class: 'card', 'data-approval': a.id },
        h('b', { text: a.toolName }), ` · call ${a.callId} · asked ${when(a.at)}`,
        a.rule ? h('div', { text: `rule: ${a.rule}` }) : undefined,
        a.reason ? h('div', { text: `reason: ${a.reason}` }) : undefined,
        args, reason,
        h('div', { class: 'actions' },
          h('button', { class: 'act approve', text: 'Approve', on: { click: () => answer('approve', false) } }),
          h('button', { class: 'act', text: 'Approve with these arguments', on: { click: () => answer('approve', true) } }),
          h('button', { class: 'act deny', text: 'Deny', on: { click: () => answer('deny', false) } }),
          h('button', { class: 'act', text: 'Show call', on: { click: () => select(a.key, a.index) } }),
          status))
    }))
  }

  // ---- health --------------------------------------------------------------------------------------------------

  async function drawHealth() {
    let gates
    try {
      gates = await (await fetch(url('/health'))).json()
    } catch {
      return
    }
    if (view !== 'health') return
    $('health-body').replaceChildren(...gates.map(({ gate, stats, health, inspect, running }) => {
      const tools = Object.entries(health.tools)
      const hits = stats.total.cacheHits
      const looked = hits + stats.total.cacheMisses
      const memory = inspect.memory
      return h('div', { class: 'health-gate' },
        h('h2', {}, gateCount > 1 ? `Gate ${gate}: ` : '', h('span', { class: `status-${health.status}`, 'data-status': health.status, text: health.status })),
        table([
          ['calls', `${stats.total.calls} (${stats.total.successes} ok)`],
          ['in flight', String(health.inFlight)],
          ['abandoned handlers', String(health.abandonedHandlers)],
          ['cache', `${memory ? `${memory.cacheEntries} ${memory.cacheEntries === 1 ? 'entry' : 'entries'}, ${memory.cacheBytes} bytes · ` : ''}hit rate ${looked ? `${Math.round((hits / looked) * 100)}%` : '–'} (${hits} of ${looked})`],
          ['store', inspect.store === 'shared' ? `shared: ${JSON.stringify(stats.store ?? {})}` : 'memory'],
        ]),
        h('h3', { text: 'Tools' }),
        h('table', {}, h('tr', {}, ['tool', 'status', 'calls', 'error rate', 'timeout rate', 'p95', 'in flight', 'late'].map((t) => h('th', { text: t }))),
          tools.map(([name, t]) => h('tr', {}, [name, h('span', { class: `status-${t.status}`, text: t.status }), t.calls, `${Math.round(t.errorRate * 100)}%`, `${Math.round(t.timeoutRate * 100)}%`, t.p95Ms === null ? '–' : fmt(t.p95Ms), t.inFlight, t.lateSettlements].map((v) => h('td', {}, typeof v === 'object' ? v : String(v)))))),
        Object.keys(inspect.breakers).length ? [h('h3', { text: 'Breakers' }), h('table', { 'data-breakers': '' }, h('tr', {}, ['tool', 'state', 'window', 'half-open in'].map((t) => h('th', { text: t }))),
          Object.entries(inspect.breakers).map(([name, b]) => h('tr', {}, h('td', { text: name }), h('td', { text: b.state }), h('td', { text: b.calls ? `${b.failures} of ${b.calls} failed (${Math.round((b.failures / b.calls) * 100)}%)` : '–' }), h('td', { text: b.halfOpenInMs === undefined ? '–' : fmt(b.halfOpenInMs) }))))] : undefined,
        memory?.budgets.length ? [h('h3', { text: `Budgets used (${memory.budgetCount} holders)` }), table(memory.budgets.map((b) => [b.key, `${b.used} · resets in ${fmt(b.expiresInMs)}`]))] : undefined,
        memory?.buckets.length ? [h('h3', { text: `Rate-limit buckets not full (${memory.bucketCount})` }), table(memory.buckets.map((b) => [b.key, `${b.tokens.toFixed(2)} tokens · full in ${fmt(b.fullInMs)}`]))] : undefined,
        running.length ? [h('h3', { text: 'Handlers not settled' }), table(running.map((r) => [r.toolName, `${r.state} ${fmt(r.runningMs)} · attempt ${r.attempt}`]))] : undefined,
        h('details', {}, h('summary', { text: 'stats()' }), pre(JSON.stringify(stats, null, 2))),
        h('details', {}, h('summary', { text: 'healthReport()' }), pre(JSON.stringify(health, null, 2))))
    }))
  }

  // ---- replay --------------------------------------------------------------------------------------------------

  const shownValue = (value) => (value === undefined ? '(none)' : typeof value === 'string' ? value : JSON.stringify(value, null, 2))

  async function runReplay(file) {
    $('replay-body').replaceChildren(h('p', { class: 'hint', text: `Replaying ${file.name}…` }))
    const res = await fetch(url('/replay', { gate: $('replay-gate').value }), { method: 'POST', body: await file.text() })
    if (!res.ok) return $('replay-body').replaceChildren(h('p', { class: 'bad', text: await res.text() }))
    const report = await res.json()
    $('replay-body').replaceChildren(
      h('p', { 'data-changed': report.changed, text: `${report.turns.length} turns replayed · ${report.changed} call${report.changed === 1 ? '' : 's'} changed` }),
      ...report.turns.map((turn, i) => h('div', { class: 'card' },
        h('b', { text: `Turn ${i + 1}` }), ` · recorded ${when(turn.at)} · `, turn.changes.length ? h('span', { class: 'warn', text: `${turn.changes.length} changes` }) : h('span', { class: 'ok', text: 'unchanged' }),
        turn.changes.map((c) => h('div', { class: 'change' }, h('div', { text: `${c.name} (${c.callId}): ${c.field}` }),
          h('div', { class: 'grid2' }, h('div', {}, h('div', { class: 'hint', text: 'recorded' }), pre(shownValue(c.recorded))), h('div', {}, h('div', { class: 'hint', text: 'now' }), pre(shownValue(c.now)))))))))
  }

  // ---- the connection and the views ----------------------------------------------------------------------------

  let dirty = false
  const redraw = () => {
    dirty = true
  }
  setInterval(() => {
    // Open calls' bars grow with time, so the live view is drawn again while something runs.
    const open = [...kept.turns.values()].some((t) => !t.done && !t.unfollowed)
    if (view === 'turns' && (dirty || open)) drawTurns()
    if (selected && (dirty || open)) drawStory()
    dirty = false
  }, 250)

  function connect() {
    const source = new EventSource(url('/events'))
    source.onopen = () => {
      $('link').textContent = 'live'
      $('link').className = 'link live'
    }
    source.onerror = () => {
      $('link').textContent = 'reconnecting…'
      $('link').className = 'link'
    }
    source.onmessage = (message) => {
      const data = JSON.parse(message.data)
      if (data.type === 'snapshot') {
        kept = fromSnapshot(data, data.keepTurns)
        approvals = new Map(data.approvals.map((a) => [a.id, a]))
        drawApprovals()
      } else if (data.type === 'events') {
        for (const [gate, events] of data.batches) apply(kept, gate, events)
      } else if (data.type === 'approval') {
        approvals.set(data.approval.id, data.approval)
        drawApprovals()
      } else if (data.type === 'resync') {
        // The server had more than this page could follow: start over from what it keeps.
        source.close()
        connect()
        return
      } else if (data.type === 'approval_done') {
        approvals.delete(data.id)
        drawApprovals()
      }
      redraw()
    }
  }

  let healthTimer
  function show(name) {
    view = name
    for (const button of document.querySelectorAll('nav button')) button.classList.toggle('on', button.dataset.view === name)
    for (const section of document.querySelectorAll('.view')) section.hidden = section.id !== name
    clearInterval(healthTimer)
    if (name === 'turns') drawTurns()
    if (name === 'approvals') drawApprovals()
    if (name === 'health') {
      drawHealth()
      healthTimer = setInterval(drawHealth, 2000)
    }
  }

  for (const button of document.querySelectorAll('nav button')) button.addEventListener('click', () => show(button.dataset.view))
  $('story-close').addEventListener('click', () => {
    selected = undefined
    $('story').hidden = true
    drawTurns()
  })
  $('replay-gate').replaceChildren(...Array.from({ length: gateCount }, (_, i) => h('option', { value: String(i), text: `gate ${i}` })))
  $('replay-file').addEventListener('change', (e) => {
    const file = e.target.files?.[0]
    if (file) runReplay(file)
  })
  drawLegend()
  drawTurns()
  connect()
})()
