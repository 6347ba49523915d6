'use strict'
// Turns recorded by the `record` option and replayed by toolgate/testing: a recording holds what a turn needs to run
// again (redacted, bounded, never failing the turn), and a replay gives the recorded results unchanged on the same
// gate, and reports each change a stricter schema, a deny rule or a shorter time limit makes.

const { describe, it } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { ToolExecutor, RECORDING_VERSION } = require('..')
const { manualClock, loadRecording, replay, expectUnchanged } = require('toolgate/testing')

const tmp = () => fs.mkdtempSync(path.join(os.tmpdir(), 'toolgate-record-'))

/** The application's gate: `change` makes it stricter (a schema, a deny rule, a shorter time limit). */
function makeGate({ clock, record, change = {}, approve, counts }) {
  const gate = new ToolExecutor({
    clock,
    record,
    approve,
    permissions: change.deny ? { deny: [{ tool: 'delete_file', reason: 'no deletions any more' }] } : undefined,
  })
  const ran = (name) => {
    if (counts) counts[name] = (counts[name] ?? 0) + 1
  }
  gate.register({
    name: 'weather',
    readOnly: true,
    idempotent: true,
    cache: { ttlMs: 60_000 },
    parameters: { type: 'object', properties: { city: { type: 'string', ...(change.strict ? { maxLength: 3 } : {}) } }, required: ['city'] },
    handler: async ({ city }) => {
      ran('weather')
      await clock.sleep(120)
      return { city, tempC: 21 }
    },
  })
  gate.register({
    name: 'book',
    retry: false,
    parameters: { type: 'object', properties: { id: { type: 'string' } } },
    handler: () => {
      ran('book')
      const err = new Error('upstream said 409: already booked')
      err.status = 409
      throw err
    },
  })
  gate.register({
    name: 'sync',
    readOnly: true,
    timeoutMs: 5_000,
    retry: false,
    parameters: { type: 'object', properties: {} },
    handler: () => {
      ran('sync')
      return new Promise(() => {})
    },
  })
  gate.register({
    name: 'report',
    readOnly: true,
    timeoutMs: change.shorter ? 1_000 : 10_000,
    retry: false,
    parameters: { type: 'object', properties: {} },
    handler: async (_args, ctx) => {
      ran('report')
      await clock.sleep(2_000, ctx.signal)
      return 'report ready'
    },
  })
  gate.register({
    name: 'delete_file',
    needsApproval: true,
    parameters: { type: 'object', properties: { path: { type: 'string' } }, required: ['path'] },
    handler: ({ path: file }) => {
      ran('delete_file')
      return `deleted ${file}`
    },
  })
  return gate
}

const FIRST_TURN = [
  { id: 'w1', name: 'weather', arguments: { city: 'Oslo' } },
  { id: 'b1', name: 'book', arguments: { id: 'r7' } },
  { id: 's1', name: 'sync', arguments: {} },
  { id: 'i1', name: 'weather', arguments: {} },
  { id: 'u1', name: 'launch_rockets', arguments: {} },
  { id: 'r1', name: 'weather', arguments: '{"city": "Paris",}' },
  { id: 'p1', name: 'report', arguments: {} },
  { id: 'd1', name: 'delete_file', arguments: { path: '/tmp/old.log' } },
]
const SECOND_TURN = [{ id: 'w2', name: 'weather', arguments: { city: 'Oslo' } }]

/** Two turns recorded on a manual clock: every kind of outcome in the first, a cache hit in the second. */
async function record(extra = {}) {
  const entries = []
  const clock = manualClock({ now: Date.UTC(2026, 11, 6) })
  const approvals = []
  const gate = makeGate({
    clock,
    record: { to: (entry) => entries.push(entry), ...extra },
    approve: async (request) => {
      approvals.push(request.toolName)
      await clock.sleep(3_000)
      return 'approve'
    },
  })
  const first = gate.execute(FIRST_TURN, { context: { sessionId: 's1', userId: 'u1' } })
  await clock.advance(11_000)
  const firstResults = await first
  await clock.advance(500)
  const second = gate.execute(SECOND_TURN, { context: { sessionId: 's1', userId: 'u1' } })
  await clock.advance(0)
  const secondResults = await second
  await gate.close({ timeoutMs: 0 }) // the hung sync is not waited for
  return { entries, results: [firstResults, secondResults], approvals, gate }
}

describe('recording turns', () => {
  it('records what a turn needs to run again: calls, options, context, each run, the answers and the results', async () => {
    const { entries, results, approvals } = await record()
    assert.deepEqual(approvals, ['delete_file'])
    const byId = Object.fromEntries(results[0].map((r) => [r.callId, r]))
    assert.equal(byId.w1.success, true)
    assert.equal(byId.b1.errorKind, 'handler_error')
    assert.equal(byId.s1.errorKind, 'timeout')
    assert.equal(byId.i1.errorKind, 'invalid_arguments')
    assert.equal(byId.u1.errorKind, 'unknown_tool')
    assert.ok(byId.r1.success && byId.r1.metadata.repairs?.length > 0, 'the trailing comma was repaired')
    assert.equal(byId.p1.output, 'report ready')
    assert.equal(byId.d1.metadata.permission.decision, 'approved')
    assert.equal(results[1][0].cached, true, 'the second turn is a cache hit')

    assert.equal(entries.length, 2)
    const [entry, hit] = entries
    assert.equal(entry.version, RECORDING_VERSION)
    assert.equal(entry.kind, 'execute')
    assert.equal(entry.at, Date.UTC(2026, 11, 6))
    assert.deepEqual(entry.calls, FIRST_TURN)
    assert.deepEqual(entry.context, { sessionId: 's1', userId: 'u1' })
    assert.deepEqual(entry.results, JSON.parse(JSON.stringify(results[0], (key, value) => (key === 'stack' ? undefined : value))), 'the results as given, but for the stack')
    assert.ok(results[0][1].metadata.stack && !JSON.stringify(entry).includes('"stack"'), 'no stack anywhere: where the code lives is not the call\'s')
    const runOf = (index) => entry.runs.filter((r) => r.index === index)
    assert.deepEqual(runOf(0).map((r) => [r.outcome, r.valueKind, r.valueFrom, r.durationMs, r.attempt]), [['returned', 'json', 'result', 120, 1]])
    assert.deepEqual(entry.results[0].metadata.structured, { city: 'Oslo', tempC: 21 }, 'the value is the result\'s structure, not repeated')
    assert.deepEqual(runOf(1).map((r) => [r.outcome, r.error.name, r.error.message, r.error.status]), [['threw', 'Error', 'upstream said 409: already booked', 409]])
    assert.deepEqual(runOf(2).map((r) => [r.outcome, r.durationMs]), [['none', 5_000]])
    assert.deepEqual(runOf(3), [], 'invalid arguments ran nothing')
    assert.deepEqual(runOf(4), [], 'an unknown tool ran nothing')
    assert.deepEqual(runOf(6).map((r) => [r.outcome, r.value, r.durationMs]), [['returned', 'report ready', 2_000]])
    assert.deepEqual(entry.answers.map((a) => [a.index, a.kind, a.answer, a.durationMs]), [[7, 'approve', { decision: 'approve' }, 3_000]])
    assert.ok(runOf(7)[0].startMs >= 3_000, 'the approved call ran once approved')
    assert.deepEqual(hit.runs, [], 'a cache hit runs nothing')
    assert.equal(hit.at - entry.at, 11_500)
  })

  it('keeps only the context fields the gate reads, and those `include` names', async () => {
    const entries = []
    const gate = new ToolExecutor({ record: { to: (e) => entries.push(e), include: ['plan'] } })
    gate.register({ name: 't', parameters: { type: 'object', properties: {} }, handler: () => 'ok' })
    const context = { sessionId: 's', tenantId: 7, maxRisk: 'read', allowedTools: ['t'], plan: { tier: 'pro' }, db: { pool: 'not for the recording' }, approve: 'x' }
    await gate.execute([{ name: 't', arguments: {} }], { context, deadlineMs: 5_000, stopOnError: true })
    assert.deepEqual(entries[0].context, { sessionId: 's', tenantId: 7, maxRisk: 'read', allowedTools: ['t'], plan: { tier: 'pro' }, approve: 'x' })
    assert.deepEqual(entries[0].options, { deadlineMs: 5_000, stopOnError: true })
    await gate.close()
  })

  it('redacts secrets in arguments, values, errors, answers and context by the executor\'s rules', async () => {
    const file = path.join(tmp(), 'turns.jsonl')
    const gate = new ToolExecutor({
      record: { to: file, include: ['session'] },
      redact: { patterns: [{ name: 'ticket', pattern: 'TKT-[0-9]{5}' }] },
      approve: () => ({ decision: 'approve', reason: 'ok for TKT-55555' }),
    })
    const ghp = 'ghp_' + 'a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8'
    gate.register({
      name: 'login',
      needsApproval: true,
      parameters: { type: 'object', properties: { user: { type: 'string' }, password: { type: 'string' } } },
      handler: ({ user }) => ({ user, token: 'tok-secret-value-123', note: `see TKT-12345 and ${ghp}` }),
    })
    gate.register({
      name: 'profile',
      maxOutputChars: 40,
      parameters: { type: 'object', properties: {} },
      handler: () => ({ name: 'ann', apiKey: 'sk-live-abcdefabcdefabcdef', bio: 'x'.repeat(100) }),
    })
    gate.register({ name: 'fail', parameters: { type: 'object', properties: {} }, retry: false, handler: () => { throw new Error(`bad key ${ghp} for TKT-99999`) } })
    await gate.execute([
      { name: 'login', arguments: { user: 'ann', password: 'hunter2-hunter2' } },
      { name: 'fail', arguments: {} },
      { name: 'profile', arguments: {} },
    ], { context: { sessionId: 'TKT-11111', session: { apiKey: 'sk-live-abcdefabcdefabcdef' } } })
    await gate.close()
    const text = fs.readFileSync(file, 'utf8')
    for (const secret of ['hunter2-hunter2', 'tok-secret-value-123', 'TKT-12345', 'TKT-99999', 'TKT-11111', 'TKT-55555', ghp, 'sk-live-abcdef']) {
      assert.ok(!text.includes(secret), `the recording holds ${secret}`)
    }
    const [entry] = (await loadRecording(file)).entries
    assert.equal(entry.calls[0].arguments.password, '[REDACTED:secret-field]')
    assert.equal(entry.runs.find((r) => r.index === 0).valueFrom, 'result')
    assert.deepEqual(entry.results[0].metadata.structured, { user: 'ann', token: '[REDACTED:secret-field]', note: 'see [REDACTED:ticket] and [REDACTED:github-token]' }, 'what is no secret stays')
    const cut = entry.runs.find((r) => r.index === 2)
    assert.equal(entry.results[2].truncated, true)
    assert.deepEqual([cut.valueFrom, cut.value.name, cut.value.apiKey, cut.value.bio.length], [undefined, 'ann', '[REDACTED:secret-field]', 100], 'a value its result does not hold whole is kept, redacted')
    assert.match(entry.runs.find((r) => r.index === 1).error.message, /bad key \[REDACTED:github-token\] for \[REDACTED:ticket\]/)
    assert.equal(entry.answers[0].answer.reason, 'ok for [REDACTED:ticket]')
    assert.equal(entry.context.session.apiKey, '[REDACTED:secret-field]')
  })

  it('bounds the file: it rotates past maxBytes, every line whole, and a turn larger than that is counted, not written', async () => {
    const dir = tmp()
    const file = path.join(dir, 'turns.jsonl')
    const gate = new ToolExecutor({ record: { to: file, maxBytes: 6_000, keep: 1 } })
    gate.register({ name: 'echo', parameters: { type: 'object', properties: { text: { type: 'string' } } }, handler: ({ text }) => text })
    for (let i = 0; i < 20; i++) await gate.execute([{ name: 'echo', arguments: { text: `turn ${i} `.repeat(20) } }])
    await gate.execute([{ name: 'echo', arguments: { text: 'x'.repeat(10_000) } }])
    const stats = gate.stats().recording
    await gate.close()
    assert.deepEqual(stats, { recorded: 20, sampledOut: 0, tooLarge: 1, failed: 0 })
    assert.deepEqual(fs.readdirSync(dir).sort(), ['turns.jsonl', 'turns.jsonl.1'], 'one rotated file kept, the older ones gone')
    let lines = 0
    for (const name of ['turns.jsonl', 'turns.jsonl.1']) {
      const text = fs.readFileSync(path.join(dir, name), 'utf8')
      assert.ok(Buffer.byteLength(text) <= 6_000, `${name} stays within maxBytes`)
      for (const line of text.split('\n').filter(Boolean)) assert.equal(JSON.parse(line).version, 1) && lines++
    }
    const { entries } = await loadRecording(file)
    assert.match(entries.at(-1).calls[0].arguments.text, /^turn 19 /, 'the newest turn is in the current file')
  })

  it('records a share of turns with `sample`', async () => {
    const entries = []
    const gate = new ToolExecutor({ record: { to: (e) => entries.push(e), sample: 0.25 } })
    gate.register({ name: 't', parameters: { type: 'object', properties: {} }, handler: () => 'ok' })
    for (let i = 0; i < 400; i++) await gate.execute([{ name: 't', arguments: {} }])
    const { recorded, sampledOut } = gate.stats().recording
    await gate.close()
    assert.equal(recorded + sampledOut, 400)
    assert.equal(entries.length, recorded)
    assert.ok(recorded > 50 && recorded < 150, `about a quarter recorded: ${recorded}`)
    const none = new ToolExecutor({ record: { to: () => assert.fail('sample 0 records nothing'), sample: 0 } })
    none.register({ name: 't', parameters: { type: 'object', properties: {} }, handler: () => 'ok' })
    await none.execute([{ name: 't', arguments: {} }])
    assert.equal(none.stats().recording.sampledOut, 1)
    await none.close()
  })

  it('never fails a turn: a write that fails is counted in stats() and reported once through onTrace', async () => {
    const traces = []
    const dir = tmp()
    const gate = new ToolExecutor({ record: { to: dir }, onTrace: (events) => traces.push(...events.filter((e) => e.type === 'record_failed')) })
    gate.register({ name: 't', parameters: { type: 'object', properties: {} }, handler: () => 'ok' })
    const warnings = []
    const onWarning = (w) => warnings.push(w.message)
    process.on('warning', onWarning)
    for (let i = 0; i < 3; i++) {
      const [r] = await gate.execute([{ name: 't', arguments: {} }])
      assert.equal(r.output, 'ok', 'the turn has its result all the same')
    }
    await new Promise((resolve) => setImmediate(resolve))
    process.off('warning', onWarning)
    assert.equal(gate.stats().recording.failed, 3)
    assert.equal(traces.length, 1, 'said once')
    assert.match(traces[0].error, /EISDIR|directory/i)
    assert.equal(warnings.filter((w) => w.includes('could not be recorded')).length, 1)
    await gate.close()

    const entries = []
    const odd = new ToolExecutor({ record: { to: (e) => entries.push(e), include: ['loop', 'big'] } })
    odd.register({ name: 't', parameters: { type: 'object', properties: {} }, handler: () => 10n ** 20n })
    const loop = { name: 'loop' }
    loop.self = loop
    const [answered] = await odd.execute([{ name: 't', arguments: {} }], { context: { loop, sessionId: 's' } })
    assert.equal(answered.output, '100000000000000000000')
    assert.equal(entries[0].context, '(a context that cannot be shown as JSON)', 'a context that is no JSON says so')
    assert.equal(odd.stats().recording.recorded, 1)
    await odd.close()

    const throwing = new ToolExecutor({ record: { to: () => { throw new Error('sink down') } } })
    throwing.register({ name: 't', parameters: { type: 'object', properties: {} }, handler: () => 'ok' })
    const [r] = await throwing.execute([{ name: 't', arguments: {} }])
    assert.equal(r.success, true)
    assert.equal(throwing.stats().recording.failed, 1)
    await throwing.close()
  })

  it('refuses options that cannot work, saying what to fix', () => {
    assert.throws(() => new ToolExecutor({ record: { to: 3 } }), /record\.to must be a file path or a function/)
    assert.throws(() => new ToolExecutor({ record: { to: 'x.jsonl', sample: 2 } }), /record\.sample must be a number from 0 to 1/)
    assert.throws(() => new ToolExecutor({ record: { to: 'x.jsonl', maxBytes: 0 } }), /record\.maxBytes must be a positive integer/)
    assert.throws(() => new ToolExecutor({ record: { to: 'x.jsonl', include: 'plan' } }), /record\.include must be an array/)
    assert.throws(() => new ToolExecutor({ record: { to: 'x.jsonl', file: 'y' } }), /unknown option "file"/)
  })
})

describe('replaying recorded turns', () => {
  it('gives the recorded results unchanged, with no handler, check or approval callback run', async () => {
    const { entries, results } = await record()
    const counts = {}
    const started = Date.now()
    const report = await replay(await loadRecording(entries), ({ clock }) => makeGate({ clock, counts }))
    assert.ok(Date.now() - started < 5_000, 'a recorded 5 s hang and 3 s approval replay on the manual clock')
    expectUnchanged(report)
    assert.equal(report.changed, 0)
    assert.deepEqual(counts, {}, 'no registered handler ran')
    assert.deepEqual(report.turns.map((t) => t.results.map((r) => r.output)), results.map((turn) => turn.map((r) => r.output)))
    assert.equal(report.turns[1].results[0].cached, true, 'the cache hit is one again: the turns replay on one gate, in order')
    const again = await replay(entries, ({ clock }) => makeGate({ clock }))
    assert.deepEqual(again.turns.map((t) => t.results.map((r) => [r.output, r.latencyMs, r.attempts])), report.turns.map((t) => t.results.map((r) => [r.output, r.latencyMs, r.attempts])), 'the same every time')
  })

  it('reports what a stricter schema, a deny rule and a shorter time limit change, call by call', async () => {
    const { entries } = await record()
    const report = await replay(entries, ({ clock }) => makeGate({ clock, change: { strict: true, deny: true, shorter: true } }))
    const changed = (callId) => Object.fromEntries(report.turns.flatMap((t) => t.changes).filter((c) => c.callId === callId).map((c) => [c.field, [c.recorded, c.now]]))
    assert.deepEqual(changed('w1').errorKind, [undefined, 'invalid_arguments'], 'Oslo is longer than the schema now allows')
    assert.deepEqual(changed('w1').success, [true, false])
    assert.deepEqual(changed('d1').errorKind, [undefined, 'permission_denied'])
    assert.match(changed('d1')['metadata.permission'][1].by, /deny delete_file/)
    assert.deepEqual(changed('p1').errorKind, [undefined, 'timeout'], 'the report took 2 s; the limit is 1 s now')
    assert.deepEqual(changed('b1'), {}, 'the failure that was is unchanged')
    assert.deepEqual(changed('s1'), {})
    assert.deepEqual(Object.keys(changed('u1')), ['error', 'output'], 'the unknown tool\'s message no longer offers delete_file')
    assert.doesNotMatch(changed('u1').error[1], /delete_file/)
    assert.equal(report.changed, 6, 'w1, r1 (Paris too is long now), u1, d1, p1, and the second turn\'s w2')
    assert.throws(() => expectUnchanged(report), (err) => {
      assert.match(err.message, /6 calls changed/)
      assert.match(err.message, /turn 0, call 'p1' \(report\): errorKind: recorded undefined, now 'timeout'/)
      assert.match(err.message, /turn 0, call 'd1' \(delete_file\): errorKind: recorded undefined, now 'permission_denied'/)
      return true
    })
  })

  it('with live handlers, runs the registered ones and shows where they now differ', async () => {
    const { entries } = await record()
    const counts = {}
    const report = await replay(entries, ({ clock }) => {
      const gate = makeGate({ clock, counts })
      gate.unregister('book')
      gate.register({ name: 'book', parameters: { type: 'object', properties: { id: { type: 'string' } } }, handler: () => 'booked r7' })
      gate.unregister('sync')
      gate.register({ name: 'sync', readOnly: true, parameters: { type: 'object', properties: {} }, handler: () => 'synced' })
      gate.unregister('report')
      gate.register({ name: 'report', readOnly: true, parameters: { type: 'object', properties: {} }, handler: () => 'report ready' })
      return gate
    }, { handlers: 'live' })
    assert.equal(counts.weather, 2, 'Oslo and Paris ran live; the second Oslo was a cache hit')
    assert.equal(counts.delete_file, 1, 'the recorded approval let it run')
    const fields = report.turns[0].changes.map((c) => `${c.callId}.${c.field}`)
    assert.ok(fields.includes('b1.success') && fields.includes('s1.errorKind'), fields.join(' '))
    assert.ok(!fields.some((f) => f.startsWith('w1.') || f.startsWith('d1.') || f.startsWith('p1.')), fields.join(' '))
    assert.equal(report.turns[0].results[1].output, 'booked r7')
  })

  it('replays retries: an attempt not recorded answers as the last recorded one', async () => {
    const entries = []
    const clock = manualClock()
    const flaky = (options) => {
      const gate = new ToolExecutor({ clock: options.clock, record: options.record })
      let n = 0
      gate.register({
        name: 'fetch',
        readOnly: true,
        retry: { maxRetries: options.retries, initialDelayMs: 100 },
        parameters: { type: 'object', properties: {} },
        handler: () => {
          n += 1
          if (n === 1) throw Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' })
          return 'fetched'
        },
      })
      return gate
    }
    const gate = flaky({ clock, retries: 1, record: { to: (e) => entries.push(e) } })
    const done = gate.execute([{ id: 'f', name: 'fetch', arguments: {} }])
    await clock.advance(1_000)
    const [r] = await done
    await gate.close()
    assert.deepEqual([r.success, r.attempts], [true, 2])
    assert.deepEqual(entries[0].runs.map((run) => [run.attempt, run.outcome, run.error?.code]), [[1, 'threw', 'ECONNRESET'], [2, 'returned', undefined]])
    expectUnchanged(await replay(entries, ({ clock }) => flaky({ clock, retries: 1 })))
    const none = await replay(entries, ({ clock }) => flaky({ clock, retries: 0 }))
    assert.deepEqual(none.turns[0].changes.map((c) => [c.field, c.recorded, c.now]).filter(([f]) => f !== 'output' && f !== 'error'), [['success', true, false], ['errorKind', undefined, 'handler_error'], ['attempts', 2, 1]])
  })

  it('replays a streaming turn with its calls arriving at their recorded times, and a cancelled turn cancelled at its time', async () => {
    const entries = []
    const clock = manualClock()
    const gate = makeGate({ clock, record: { to: (e) => entries.push(e) } })
    const turn = gate.turn()
    turn.add({ id: 'a', name: 'weather', arguments: { city: 'Rome' } })
    await clock.advance(300)
    turn.add({ id: 'b', name: 'weather', arguments: { city: 'Lima' } })
    await clock.advance(50)
    turn.end()
    await clock.advance(500)
    const streamed = await turn.results
    const controller = new AbortController()
    const cancelled = gate.execute([{ id: 'c', name: 'report', arguments: {} }], { signal: controller.signal })
    await clock.advance(700)
    controller.abort(new Error('the user left'))
    const [stopped] = await cancelled
    await gate.close()
    assert.equal(stopped.errorKind, 'cancelled')
    assert.deepEqual(entries[0].arrivedMs, [0, 300])
    assert.equal(entries[0].endedMs, 350)
    assert.deepEqual(entries[1].cancelled, { atMs: 700, reason: 'the user left' })
    const report = await replay(entries, ({ clock }) => makeGate({ clock }))
    expectUnchanged(report)
    assert.deepEqual(report.turns[0].results.map((r) => [r.output, r.metadata.queuedMs ?? 0]), streamed.map((r) => [r.output, r.metadata.queuedMs ?? 0]))
    assert.equal(report.turns[1].results[0].error, stopped.error, 'cancelled with the same reason')
  })

  it('loadRecording refuses a malformed line with its line number, and entries it cannot replay', async () => {
    const { entries } = await record()
    const file = path.join(tmp(), 'turns.jsonl')
    fs.writeFileSync(file, `${JSON.stringify(entries[0])}\n\n{"version": 1, "at": 1,\n`)
    await assert.rejects(loadRecording(file), /turns\.jsonl:3: not JSON/)
    fs.writeFileSync(file, `${JSON.stringify(entries[0])}\n${JSON.stringify({ ...entries[1], version: 99 })}\n`)
    await assert.rejects(loadRecording(file), /turns\.jsonl:2: not a recorded turn: version 99/)
    await assert.rejects(loadRecording([{ ...entries[0], runs: undefined }]), /entry 0: not a recorded turn: "runs" must be an array/)
    await assert.rejects(loadRecording(42), /expected a file path or an array/)
    await assert.rejects(replay(entries, ({ clock }) => makeGate({ clock }), { handlers: 'mocked' }), /handlers must be one of recorded, live/)
    await assert.rejects(replay(entries, () => ({})), /setup must return/)
    assert.throws(() => expectUnchanged({}), /expected what replay\(\) resolved to/)
  })
})

/** Records what `drive(gate, clock)` runs on a manual clock, then replays it with the same `makeGate`. */
async function roundTrip(makeGate, drive, { replayOptions, recordGate = {} } = {}) {
  const entries = []
  const clock = manualClock({ now: 1_000_000 })
  const gate = makeGate({ clock, record: { to: (e) => entries.push(e) }, ...recordGate })
  const recorded = await drive(gate, clock)
  await gate.close({ timeoutMs: 0 })
  const report = await replay(entries, ({ clock }) => makeGate({ clock }), replayOptions)
  return { entries, recorded, report }
}

/** Moves the clock until `promise` settles. */
async function until(clock, promise, stepMs = 100) {
  let done = false
  promise.then(() => { done = true }, () => { done = true })
  for (let t = 0; !done && t < 200_000; t += stepMs) await clock.advance(stepMs)
  return promise
}

const NO_ARGS = { type: 'object', properties: {} }

describe('replaying what is easy to get wrong', () => {
  it('approvals that deny, edit, throw or never come; checks that refuse, throw or hang; costs, edited arguments priced again', async () => {
    const answers = {
      a1: () => 'approve',
      a2: () => ({ decision: 'deny', reason: 'not today' }),
      a3: () => ({ decision: 'approve', arguments: { n: 99 } }),
      a4: () => { throw new Error('approval UI crashed') },
      a5: () => new Promise(() => {}),
      b2: () => ({ decision: 'approve', arguments: { n: 8 } }),
    }
    const N = { type: 'object', properties: { n: { type: 'number' } } }
    const makeGate = ({ clock, record, approve }) => {
      const gate = new ToolExecutor({ clock, record, retry: false, approve, approvalTimeoutMs: 5_000, checkTimeoutMs: 2_000 })
      gate.register({ name: 'pay', needsApproval: true, parameters: N, handler: ({ n }) => `paid ${n}` })
      gate.register({ name: 'checked', parameters: N, check: ({ n }) => (n > 5 ? 'too many' : undefined), handler: ({ n }) => `ok ${n}` })
      gate.register({ name: 'checkThrows', parameters: N, check: () => { throw new Error('check db down') }, handler: () => 'x' })
      gate.register({ name: 'checkHangs', parameters: N, check: () => (record ? new Promise(() => {}) : undefined), handler: () => 'ran' })
      gate.register({ name: 'buy', needsApproval: true, parameters: N, budget: { maxCost: 10 }, cost: ({ n }) => n, handler: ({ n }) => `bought ${n}` })
      return gate
    }
    const calls = [
      ...['a1', 'a2', 'a3', 'a4', 'a5'].map((id) => ({ id, name: 'pay', arguments: { n: 1 } })),
      { id: 'k1', name: 'checked', arguments: { n: 1 } }, { id: 'k2', name: 'checked', arguments: { n: 9 } },
      { id: 'k3', name: 'checkThrows', arguments: { n: 1 } }, { id: 'k4', name: 'checkHangs', arguments: { n: 1 } },
      { id: 'b1', name: 'buy', arguments: { n: 4 } }, { id: 'b2', name: 'buy', arguments: { n: 1 } },
    ]
    const { entries, recorded, report } = await roundTrip(makeGate, (gate, clock) => until(clock, gate.execute(calls, { context: { sessionId: 's' } })), {
      recordGate: { approve: (request) => (answers[request.callId] ?? (() => 'approve'))(request) },
    })
    const byId = Object.fromEntries(recorded.map((r) => [r.callId, r]))
    assert.match(byId.a5.error, /5000 ms/, 'no approval came')
    assert.match(byId.k4.error, /2000 ms/, 'the check never answered')
    assert.equal(byId.b2.errorKind, 'budget_exceeded', 'the edited arguments cost 8 on top of 4')
    assert.deepEqual(entries[0].answers.filter((a) => a.unanswered).map((a) => [a.index, a.kind]).sort(), [[4, 'approve'], [8, 'check']])
    expectUnchanged(report)
  })

  it('cancellations: by a signal mid-turn, a signal aborted before, close(), a streaming cancel in the same ms as an add, a tapped late call', async () => {
    const makeGate = ({ clock, record }) => {
      const gate = new ToolExecutor({ clock, record, retry: false })
      gate.register({ name: 'slow', readOnly: true, parameters: NO_ARGS, handler: (_a, ctx) => clock.sleep(1_000, ctx.signal).then(() => 'slow ok') })
      gate.register({ name: 'fast', readOnly: true, parameters: NO_ARGS, handler: () => 'fast ok' })
      return gate
    }
    const calls = [{ id: 's1', name: 'slow', arguments: {} }, { id: 'f1', name: 'fast', arguments: {} }]
    const chunk = (i, id) => ({ choices: [{ index: 0, delta: { tool_calls: [{ index: i, id, type: 'function', function: { name: 'fast', arguments: '{}' } }] } }] })
    const { entries, report } = await roundTrip(makeGate, async (gate, clock) => {
      const controller = new AbortController()
      const stopped = gate.execute(calls, { signal: controller.signal })
      await clock.advance(300)
      controller.abort(new Error('the user pressed stop'))
      await until(clock, stopped)
      await until(clock, gate.execute(calls, { signal: AbortSignal.abort('gone') }))
      const same = gate.turn()
      same.add(calls[1])
      same.cancel('stop')
      await until(clock, same.results)
      const tapped = gate.turn()
      async function* stream() {
        yield chunk(0, 'a1')
        yield chunk(1, 'a2') // completes a1
        tapped.cancel('user stopped')
        yield { choices: [{ index: 0, delta: {}, finish_reason: 'tool_calls' }] } // completes a2, late
      }
      for await (const _event of tapped.tap(stream(), 'openai-chat'));
      await until(clock, tapped.results)
      const open = gate.turn()
      open.add(calls[0])
      await clock.advance(100)
      const closing = open.results
      await gate.close({ timeoutMs: 0 })
      await closing
    })
    assert.deepEqual(entries.map((e) => e.cancelled && [e.cancelled.atMs, e.cancelled.before ?? false, e.cancelled.closed ?? false]), [
      [300, false, false], [0, true, false], [0, false, false], [0, false, false], [0, true, false], [100, false, true],
    ])
    assert.equal(report.turns.length, 6)
    expectUnchanged(report)
  })

  it('progress keeps an idle limit at bay again; backoff jitter and an untrusted tool\'s fence replay the same every time', async () => {
    let failures = 0
    const makeGate = ({ clock, record }) => {
      const gate = new ToolExecutor({ clock, record })
      gate.register({
        name: 'export',
        idleTimeoutMs: 500,
        timeoutMs: 10_000,
        retry: false,
        parameters: NO_ARGS,
        handler: async (_a, ctx) => {
          for (let i = 0; i < 5; i++) {
            await clock.sleep(200)
            ctx.progress({ done: i })
          }
          return 'exported'
        },
      })
      gate.register({ name: 'fetch_page', untrusted: true, readOnly: true, parameters: NO_ARGS, handler: () => 'page text' })
      gate.register({
        name: 'flaky',
        readOnly: true,
        timeoutMs: 1_000,
        retry: { maxRetries: 6, initialDelayMs: 400, maxElapsedMs: 2_500 },
        parameters: NO_ARGS,
        handler: () => {
          failures += 1
          throw Object.assign(new Error('busy'), { retryable: true })
        },
      })
      return gate
    }
    const calls = [{ id: 'x1', name: 'export', arguments: {} }, { id: 'p1', name: 'fetch_page', arguments: {} }, { id: 'r1', name: 'flaky', arguments: {} }]
    const { entries, recorded, report } = await roundTrip(makeGate, (gate, clock) => until(clock, gate.execute(calls), 50))
    assert.equal(recorded[0].output, 'exported')
    assert.equal(entries[0].runs.find((r) => r.index === 0).progressMs.length, 5)
    assert.match(recorded[1].output, /<untrusted-data source="fetch_page" id="[A-Za-z0-9]+">/)
    expectUnchanged(report)
    const again = await replay(entries, ({ clock }) => makeGate({ clock }))
    assert.deepEqual(again.turns[0].results.map((r) => r.attempts), report.turns[0].results.map((r) => r.attempts), 'the same backoffs, the same attempts')
    assert.ok(failures > 1)
  })

  it('waits for a live check that takes real time rather than jumping the clock to its limit', async () => {
    const makeGate = ({ clock, record }) => {
      const gate = new ToolExecutor({ clock, record })
      gate.register({
        name: 'send',
        parameters: { type: 'object', properties: { to: { type: 'string' } } },
        check: () => new Promise((resolve) => setTimeout(resolve, 30)),
        handler: ({ to }) => `sent to ${to}`,
      })
      return gate
    }
    // Recorded with the check's real 30 ms and nothing due on the clock: the turn ends without moving it.
    const { report } = await roundTrip(makeGate, (gate) => gate.execute([{ id: 'm1', name: 'send', arguments: { to: 'ann' } }]), { replayOptions: { handlers: 'live' } })
    expectUnchanged(report)
    assert.equal(report.turns[0].results[0].output, 'sent to ann')
  })

  it('never fails the turn on an async sink that rejects or a value past maxBytes, and redacts arguments sent as JSON text and a command\'s spawn error', async () => {
    const asyncSink = new ToolExecutor({ record: { to: async () => { throw new Error('queue is down') } } })
    asyncSink.register({ name: 't', parameters: NO_ARGS, handler: () => 'ok' })
    const [r] = await asyncSink.execute([{ name: 't', arguments: {} }])
    await new Promise((resolve) => setImmediate(resolve))
    assert.equal(r.output, 'ok')
    assert.deepEqual(asyncSink.stats().recording, { recorded: 0, sampledOut: 0, tooLarge: 0, failed: 1 })
    await asyncSink.close()

    const entries = []
    const bounded = new ToolExecutor({ record: { to: (e) => entries.push(e), maxBytes: 4_000 } })
    bounded.register({ name: 'big', parameters: NO_ARGS, handler: () => Buffer.alloc(10_000, 1) })
    const [big] = await bounded.execute([{ name: 'big', arguments: {} }])
    assert.equal(big.success, true)
    assert.deepEqual([entries.length, bounded.stats().recording.tooLarge], [0, 1])
    await bounded.close()

    const ghp = 'ghp_' + 'A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8'
    const file = path.join(tmp(), 'turns.jsonl')
    const gate = new ToolExecutor({ record: { to: file } })
    gate.register({ name: 'login', parameters: { type: 'object', properties: { user: { type: 'string' }, password: { type: 'string' } } }, handler: ({ user }) => `hello ${user}` })
    if (process.platform !== 'win32') gate.registerCommand({ name: 'run', parameters: NO_ARGS, command: () => ({ argv: [`/nonexistent/${ghp}`] }) })
    await gate.execute([
      { type: 'function', id: 'l1', function: { name: 'login', arguments: '{"user": "ann", "password": "swordfish"}' } },
      ...(process.platform !== 'win32' ? [{ name: 'run', arguments: {} }] : []),
    ])
    await gate.close()
    const text = fs.readFileSync(file, 'utf8')
    assert.ok(!text.includes('swordfish') && !text.includes(ghp), text)
    const [entry] = (await loadRecording(file)).entries
    assert.deepEqual(JSON.parse(entry.calls[0].function.arguments), { user: 'ann', password: '[REDACTED:secret-field]' })
  })
})

describe('recording and replaying, bounded and in step with real time', () => {
  it('keeps bytes that are text as redacted text, others as base64, and replays both unchanged', async () => {
    const ghp = 'ghp_' + 'A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8'
    const makeGate = ({ clock, record }) => {
      const gate = new ToolExecutor({ clock, record })
      gate.register({ name: 'export', readOnly: true, parameters: NO_ARGS, handler: () => Buffer.from(`config\nGITHUB_TOKEN=${ghp}\n`) })
      gate.register({ name: 'image', readOnly: true, parameters: NO_ARGS, handler: () => Uint8Array.from([0x89, 0x50, 0x4e, 0x47, 0xff, 0x00, 0xfe]) })
      return gate
    }
    const { entries, report } = await roundTrip(makeGate, (gate) => gate.execute([{ id: 'x', name: 'export', arguments: {} }, { id: 'i', name: 'image', arguments: {} }]))
    assert.ok(!JSON.stringify(entries).includes(ghp))
    assert.equal(entries[0].runs.find((r) => r.index === 0).text, 'config\nGITHUB_TOKEN=[REDACTED:github-token]\n')
    assert.equal(entries[0].runs.find((r) => r.index === 1).value, Buffer.from([0x89, 0x50, 0x4e, 0x47, 0xff, 0x00, 0xfe]).toString('base64'))
    expectUnchanged(report)
  })

  it('gives each executor that recorded to one file its own gate on replay, and counts the file\'s size once for all of them', async () => {
    const dir = tmp()
    const file = path.join(dir, 'turns.jsonl')
    const makeGate = ({ clock, record }) => {
      const gate = new ToolExecutor({ clock, record: record && { ...record, maxBytes: 20_000 } })
      gate.register({ name: 'search', budget: { maxCalls: 1 }, parameters: NO_ARGS, handler: () => 'results '.repeat(100) })
      return gate
    }
    // Two executors at once (as after a restart, or two in one process), each within its budget of one call.
    const [a, b] = [makeGate({ record: { to: file } }), makeGate({ record: { to: file } })]
    for (let i = 0; i < 40; i++) {
      await a.execute([{ id: `a${i}`, name: 'search', arguments: {} }], { context: { sessionId: `s${i}` } })
      await b.execute([{ id: `b${i}`, name: 'search', arguments: {} }], { context: { sessionId: `s${i}` } })
    }
    await Promise.all([a.close(), b.close()])
    for (const name of fs.readdirSync(dir)) assert.ok(fs.statSync(path.join(dir, name)).size <= 20_000, `${name} stays within maxBytes`)
    const { entries } = await loadRecording(file)
    assert.equal(new Set(entries.map((e) => e.executor)).size, 2)
    const report = await replay(entries, makeGate)
    expectUnchanged(report)
    assert.ok(report.turns.every((t) => t.results[0].success), 'no budget carried from one executor to the other')
  })

  it('counts progress reports towards the bound: a run that reports without end is not held in memory whole', async () => {
    const gate = new ToolExecutor({ record: { to: () => assert.fail('too large to record'), maxBytes: 10_000 } })
    gate.register({
      name: 'scan',
      parameters: NO_ARGS,
      handler: (_args, ctx) => {
        for (let i = 0; i < 5_000; i++) ctx.progress(i)
        return 'scanned'
      },
    })
    const [r] = await gate.execute([{ name: 'scan', arguments: {} }])
    assert.equal(r.output, 'scanned')
    assert.equal(gate.stats().recording.tooLarge, 1)
    await gate.close()
  })

  it('keeps real time under a test\'s faked Date: a live check that hangs counts as hung after a while, the gate\'s limit then answers', { timeout: 30_000 }, async () => {
    const makeGate = ({ clock, record, hangingCheck }) => {
      const gate = new ToolExecutor({ clock, record, checkTimeoutMs: 500 })
      gate.register({ name: 'lookup', parameters: NO_ARGS, ...(hangingCheck ? { check: () => new Promise(() => {}) } : {}), handler: () => 'found' })
      gate.register({ name: 'slow', parameters: NO_ARGS, timeoutMs: 60_000, handler: () => clock.sleep(30_000).then(() => 'done') })
      return gate
    }
    const entries = []
    const clock = manualClock({ now: 1e6 })
    const gate = makeGate({ clock, record: { to: (e) => entries.push(e) } })
    await until(clock, gate.execute([{ id: 'a', name: 'lookup', arguments: {} }, { id: 'b', name: 'slow', arguments: {} }]), 1_000)
    await gate.close()
    const realNow = Date.now
    Date.now = () => 0 // as vi.useFakeTimers() leaves it
    let report
    const started = performance.now()
    try {
      report = await replay(entries, ({ clock }) => makeGate({ clock, hangingCheck: true }))
    } finally {
      Date.now = realNow
    }
    assert.ok(performance.now() - started < 15_000, 'the recorded 30 s run is not waited for in real time')
    assert.match(report.turns[0].results[0].error, /500 ms/, 'the check\'s own limit answered for it')
    assert.equal(report.turns[0].results[1].output, 'done')
  })

  it('waits for the live check of arguments a recorded approval edited', async () => {
    const makeGate = ({ clock, record, approve }) => {
      const gate = new ToolExecutor({ clock, record, approve, checkTimeoutMs: 2_000 })
      gate.register({
        name: 'transfer',
        needsApproval: true,
        parameters: { type: 'object', properties: { to: { type: 'string' } } },
        check: async ({ to }) => {
          await new Promise((resolve) => setTimeout(resolve, 20))
          return to === 'blocked' ? 'account blocked' : undefined
        },
        handler: ({ to }) => `sent to ${to}`,
      })
      return gate
    }
    const entries = []
    const gate = makeGate({ record: { to: (e) => entries.push(e) }, approve: () => ({ decision: 'approve', arguments: { to: 'bob' } }) })
    const [r] = await gate.execute([{ id: 't1', name: 'transfer', arguments: { to: 'ann' } }])
    await gate.close()
    assert.equal(r.output, 'sent to bob')
    expectUnchanged(await replay(entries, makeGate))
  })
})
