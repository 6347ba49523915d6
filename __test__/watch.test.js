'use strict'
// Turns watched live (`gate.watch`): each turn, its calls, each station a call meets as it meets it, each handler
// started, each question put to the application, and the results, in batches that never hold the pipeline; nothing
// of it while nobody watches.

const { describe, it } = require('node:test')
const assert = require('node:assert/strict')
const { ToolExecutor } = require('..')
const { manualClock } = require('toolgate/testing')

const NO_ARGS = { type: 'object', properties: {} }
const tick = () => new Promise((resolve) => setImmediate(resolve))

function gateOn(clock, options = {}) {
  const gate = new ToolExecutor({ clock, approve: () => clock.sleep(500).then(() => 'approve'), ...options })
  gate.register({ name: 'api', readOnly: true, rateLimit: { limit: '1/s', maxWaitMs: 5_000 }, parameters: NO_ARGS, handler: () => 'ok' })
  gate.register({ name: 'deploy', needsApproval: true, parameters: NO_ARGS, handler: () => 'deployed' })
  let failures = 0
  gate.register({
    name: 'flaky',
    readOnly: true,
    retry: { maxRetries: 1, initialDelayMs: 200 },
    parameters: NO_ARGS,
    handler: () => {
      failures += 1
      if (failures === 1) throw Object.assign(new Error('busy'), { retryable: true })
      return 'fine'
    },
  })
  gate.register({ name: 'hang', readOnly: true, timeoutMs: 1_000, retry: false, parameters: NO_ARGS, handler: () => new Promise(() => {}) })
  gate.register({
    name: 'login',
    readOnly: true,
    idempotent: true,
    parameters: { type: 'object', properties: { user: { type: 'string' }, password: { type: 'string' } } },
    handler: ({ user }) => clock.sleep(300).then(() => `hello ${user}`),
  })
  return gate
}

/** Moves the clock until `promise` settles. */
async function until(clock, promise) {
  let done = false
  promise.then(() => { done = true }, () => { done = true })
  while (!done) await clock.advance(100)
  return promise
}

describe('watching turns live', () => {
  it('hears each wait as it begins, each handler started, each question asked, and each call sealed, in order', async () => {
    const clock = manualClock()
    const gate = gateOn(clock)
    const events = []
    const stop = gate.watch((batch) => events.push(...batch))
    const calls = [
      { id: 'a1', name: 'api', arguments: {} },
      { id: 'a2', name: 'api', arguments: {} },
      { id: 'd1', name: 'deploy', arguments: {} },
      { id: 'f1', name: 'flaky', arguments: {} },
      { id: 'h1', name: 'hang', arguments: {} },
      { id: 'l1', name: 'login', arguments: { user: 'ann', password: 'hunter2-hunter2' } },
      { id: 'l2', name: 'login', arguments: { user: 'ann', password: 'hunter2-hunter2' } },
    ]
    const pending = gate.execute(calls)
    await tick()
    const early = events.length
    assert.ok(events.some((e) => e.type === 'station' && e.index === 1 && `${e.station}:${e.outcome}` === 'rate_limit:waited'), 'the wait for a token is heard before it ends')
    assert.ok(events.some((e) => e.type === 'ask' && e.index === 2 && e.kind === 'approve'), 'the approval asked for')
    assert.ok(events.some((e) => e.type === 'station' && e.index === 6 && `${e.station}:${e.outcome}` === 'cache:joined'), 'the identical call joins the first one\'s flight')
    assert.ok(!events.some((e) => e.type === 'result'), 'no result yet')
    const results = await until(clock, pending)
    stop()
    assert.ok(events.length > early)

    const [turn] = events
    assert.equal(turn.type, 'turn')
    assert.equal(turn.streaming, false)
    const traceId = turn.turn
    assert.ok(events.every((e) => e.turn === traceId))
    const callEvents = events.filter((e) => e.type === 'call')
    assert.deepEqual(callEvents.map((e) => [e.index, e.callId, e.name]), calls.map((c, i) => [i, c.id, c.name]))
    assert.equal(callEvents[5].args.password, '[REDACTED:secret-field]', 'arguments as a trace shows them')
    assert.deepEqual(events.filter((e) => e.type === 'start' && e.index === 3).map((e) => e.attempt), [1, 2], 'the retry started again')
    for (const [index, result] of results.entries()) {
      const stations = events.filter((e) => e.type === 'station' && e.index === index).map((e) => `${e.station}:${e.outcome}`)
      const sealed = result.errorKind ?? (result.cached ? 'cached' : 'ok')
      assert.deepEqual(stations, [...result.metadata.stages, `sealed:${sealed}`], `call ${index}: every station once, in order, then sealed`)
      assert.deepEqual(events.find((e) => e.type === 'result' && e.index === index).result, result)
    }
    assert.ok(events.some((e) => e.type === 'station' && e.index === 3 && `${e.station}:${e.outcome}` === 'retry:scheduled'))
    assert.equal(events.at(-1).type, 'done')
    const startOf = (index) => events.findIndex((e) => e.type === 'start' && e.index === index)
    const waited = events.findIndex((e) => e.type === 'station' && e.index === 1 && e.station === 'rate_limit')
    assert.ok(waited < startOf(1), 'heard waiting before it started')
    await gate.close()
  })

  it('hears a streaming turn\'s calls as they are added and their results as they settle', async () => {
    const clock = manualClock()
    const gate = gateOn(clock)
    const events = []
    gate.watch((batch) => events.push(...batch))
    const turn = gate.turn()
    turn.add({ id: 'l1', name: 'login', arguments: { user: 'bo' } })
    await clock.advance(400)
    await tick()
    assert.deepEqual(events.filter((e) => e.type === 'result').map((e) => e.result.output), ['hello bo'], 'the first result, before the turn ends')
    turn.add({ id: 'x', name: 'nope', arguments: {} })
    turn.end()
    await until(clock, turn.results)
    await tick()
    assert.equal(events[0].streaming, true)
    assert.deepEqual(events.filter((e) => e.type === 'call').map((e) => [e.index, e.callId]), [[0, 'l1'], [1, 'x']])
    assert.deepEqual(events.filter((e) => e.type === 'result').map((e) => [e.index, e.result.errorKind ?? 'ok']), [[0, 'ok'], [1, 'unknown_tool']])
    assert.equal(events.filter((e) => e.type === 'done').length, 1)
    await gate.close()
  })

  it('does nothing while nobody watches, stops when told, and survives a listener that throws', async () => {
    const clock = manualClock()
    const gate = gateOn(clock)
    const heard = []
    const stop = gate.watch((batch) => heard.push(...batch))
    const warnings = []
    const onWarning = (w) => warnings.push(w.message)
    process.on('warning', onWarning)
    const stopThrowing = gate.watch(() => { throw new Error('listener broke') })
    const [r] = await until(clock, gate.execute([{ name: 'login', arguments: { user: 'cy' } }]))
    await tick()
    process.off('warning', onWarning)
    assert.equal(r.output, 'hello cy', 'the turn is whole')
    assert.ok(warnings.some((w) => w.includes('listener broke')))
    assert.ok(heard.some((e) => e.type === 'done'))
    stop()
    stopThrowing()
    const before = heard.length
    await until(clock, gate.execute([{ name: 'login', arguments: { user: 'di' } }]))
    await tick()
    assert.equal(heard.length, before, 'nothing after the last watcher stopped')
    assert.throws(() => gate.watch('no'), /listener must be a function/)
    await gate.close()
  })
})

describe('watchers that come late, share, keep, or misbehave', () => {
  it('follows only turns begun while watched, each stage once, and nothing the calls met before', async () => {
    const clock = manualClock()
    const gate = gateOn(clock)
    const before = gate.execute([{ id: 'a1', name: 'api', arguments: {} }, { id: 'a2', name: 'api', arguments: {} }])
    await tick()
    const events = []
    const stop = gate.watch((batch) => events.push(...batch))
    const during = gate.execute([{ id: 'l1', name: 'login', arguments: { user: 'ed' } }])
    await until(clock, Promise.all([before, during]))
    await tick()
    stop()
    const turns = new Set(events.map((e) => e.turn))
    assert.equal(turns.size, 1, 'only the turn begun while watched')
    assert.equal(events[0].type, 'turn')
    const [result] = await during
    const stations = events.filter((e) => e.type === 'station').map((e) => `${e.station}:${e.outcome}`)
    assert.deepEqual(stations, [...result.metadata.stages, 'sealed:ok'])
    await gate.close()
  })

  it('gives each watcher a frozen batch and copies of the results, and counts the same function twice as two watchers', async () => {
    const gate = new ToolExecutor()
    gate.register({ name: 'echo', parameters: { type: 'object', properties: { text: { type: 'string' } } }, handler: ({ text }) => text })
    let tampered = 0
    const heard = []
    const listener = (batch) => {
      heard.push(batch)
      for (const event of batch) {
        if (event.type !== 'result') continue
        try {
          event.result.output = 'TAMPERED'
        } catch {
          tampered += 1
        }
      }
      try {
        batch.length = 0
      } catch {
        // frozen
      }
    }
    const stopFirst = gate.watch(listener)
    const stopSecond = gate.watch(listener)
    const [r] = await gate.execute([{ id: 'call_sk-proj-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789abcd', name: 'echo', arguments: { text: 'hi' } }])
    await tick()
    assert.equal(r.output, 'hi', 'the caller\'s result is its own')
    assert.equal(tampered, 2, 'each watcher\'s result is frozen')
    const perTurn = heard.length
    assert.equal(perTurn % 2, 0, 'each batch heard twice, once per subscription')
    assert.ok(heard.every((batch) => batch.length > 0), 'the first watcher could not empty a batch for the second')
    const all = heard.flat()
    const callEvent = all.find((e) => e.type === 'call')
    const resultEvent = all.find((e) => e.type === 'result')
    assert.ok(!JSON.stringify(all).includes('sk-proj-AbCd'), 'the call id redacted everywhere it is shown')
    assert.equal(resultEvent.result.callId, callEvent.callId)
    stopFirst()
    await gate.execute([{ name: 'echo', arguments: { text: 'again' } }])
    await tick()
    assert.equal(heard.length - perTurn, perTurn / 2, 'the second subscription of the same function still hears, once')
    stopSecond()
    await gate.close()
  })

  it('survives a watcher whose promise rejects', async () => {
    const gate = new ToolExecutor()
    gate.register({ name: 'echo', parameters: NO_ARGS, handler: () => 'hi' })
    const warnings = []
    const onWarning = (w) => warnings.push(w.message)
    process.on('warning', onWarning)
    gate.watch(async () => { throw new Error('socket closed') })
    const [r] = await gate.execute([{ name: 'echo', arguments: {} }])
    await new Promise((resolve) => setTimeout(resolve, 20))
    process.off('warning', onWarning)
    assert.equal(r.output, 'hi')
    assert.ok(warnings.some((w) => w.includes('socket closed')), warnings.join('\n'))
    await gate.close()
  })
  it('a watcher that answers approvals is asked beside the callback, redacted, and told once the approval is decided', async () => {
    let release
    const gate = new ToolExecutor({ approve: () => new Promise((resolve) => { release = resolve }) })
    gate.register({ name: 'deploy', needsApproval: true, handler: ({ env }) => `deployed to ${env}` })
    const asked = []
    const stop = gate.watch(() => {}, { approve: (request) => new Promise((resolve) => asked.push({ request, resolve })) })
    const secret = 'sk-proj-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789abcd'
    const first = gate.execute([{ id: `call_${secret}`, name: 'deploy', arguments: { env: 'prod', note: `key ${secret}` } }])
    while (asked.length === 0) await tick()
    const { request, resolve } = asked[0]
    assert.equal(request.toolName, 'deploy')
    assert.equal(request.index, 0)
    assert.match(request.turn, /^\d+-\d+$/)
    assert.ok(!JSON.stringify(request).includes('sk-proj-AbCd'), 'the id and arguments as a trace shows them')
    assert.equal(request.signal.aborted, false)
    resolve({ decision: 'approve', arguments: { env: 'staging' } })
    const [r] = await first
    assert.equal(r.output, 'deployed to staging', "the watcher's answer came first and decided")
    assert.equal(request.signal.aborted, true, 'told that the approval is decided')
    release('deny') // the callback's late answer changes nothing
    const second = gate.execute([{ name: 'deploy', arguments: { env: 'prod' } }])
    while (asked.length === 1) await tick()
    release({ decision: 'deny', reason: 'not today' })
    const [denied] = await second
    assert.match(denied.error, /not today/, "the callback's answer came first and decided")
    assert.equal(asked[1].request.signal.aborted, true)
    stop()
    await gate.close()
  })

  it('a watcher that answers approvals stands in for a missing callback, and one that throws decides nothing while another may answer', async () => {
    const gate = new ToolExecutor()
    gate.register({ name: 'deploy', needsApproval: true, handler: () => 'deployed' })
    const stopThrowing = gate.watch(() => {}, { approve: () => { throw new Error('page gone') } })
    const stopAnswering = gate.watch(() => {}, { approve: () => new Promise((resolve) => setTimeout(resolve, 20, 'approve')) })
    const [approved] = await gate.execute([{ name: 'deploy' }])
    assert.equal(approved.output, 'deployed')
    stopAnswering()
    const [failed] = await gate.execute([{ name: 'deploy' }])
    assert.equal(failed.errorKind, 'approval_denied')
    assert.match(failed.error, /page gone/, "with every approver failing, the failure decides")
    stopThrowing()
    const [none] = await gate.execute([{ name: 'deploy' }])
    assert.match(none.error, /no approval callback is set/, 'with no watcher left, as before')
    assert.throws(() => gate.watch(() => {}, { approve: 'yes' }), /approve must be a function/)
    await gate.close()
  })

  it('a start event gives the first attempt the arguments the handler got, repaired', async () => {
    const gate = new ToolExecutor()
    gate.register({ name: 'add', parameters: { type: 'object', properties: { n: { type: 'integer' } } }, handler: (args) => { args.n += 10; return args.n } })
    const events = []
    const stop = gate.watch((batch) => events.push(...batch))
    await gate.execute([{ name: 'add', arguments: '{"n": "4",}' }])
    await tick()
    const start = events.find((e) => e.type === 'start')
    assert.deepEqual(start.args, { n: 4 }, 'as given, though the handler changed them after')
    assert.equal(events.find((e) => e.type === 'call').args, '{"n": "4",}', 'the call as the model sent it')
    stop()
    await gate.close()
  })
  it("a watcher's edited arguments keep the call's own values where it left what it was shown (redacted, cut)", async () => {
    const gate = new ToolExecutor()
    const got = []
    gate.register({ name: 'deploy', needsApproval: true, handler: (args) => { got.push(args); return 'deployed' } })
    const secret = 'sk-proj-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789abcd'
    const notes = 'n'.repeat(5_000)
    const stop = gate.watch(() => {}, { approve: ({ arguments: shown }) => ({ decision: 'approve', arguments: { ...shown, env: 'staging', extra: { added: true } } }) })
    const [r] = await gate.execute([{ name: 'deploy', arguments: { env: 'prod', apiKey: secret, notes, nested: { token: secret, keep: 1 } } }])
    assert.equal(r.output, 'deployed')
    assert.deepEqual(got[0], { env: 'staging', apiKey: secret, notes, nested: { token: secret, keep: 1 }, extra: { added: true } })
    stop()
    await gate.close()
  })

  it('an approving watcher that does not follow the turn, or gives no decision, decides nothing', async () => {
    let release
    const gate = new ToolExecutor()
    gate.register({ name: 'slow_check', check: () => new Promise((resolve) => { release = resolve }), needsApproval: true, handler: () => 'ran' })
    gate.register({ name: 'other', handler: () => 'other ran' })
    const before = gate.execute([{ name: 'slow_check' }])
    while (release === undefined) await tick()
    const stop = gate.watch(() => {}, { approve: () => 'approve' })
    release(undefined)
    const [unfollowed] = await before
    assert.equal(unfollowed.errorKind, 'approval_denied', 'a turn begun before the watcher is not its to approve')
    assert.match(unfollowed.error, /no approval callback is set/)
    assert.equal((await gate.execute([{ name: 'other' }]))[0].output, 'other ran', 'and nothing else failed')
    stop()

    let answer
    const withCallback = new ToolExecutor({ approve: () => new Promise((resolve) => { answer = resolve }) })
    withCallback.register({ name: 'deploy', needsApproval: true, handler: () => 'deployed' })
    const abstains = withCallback.watch(() => {}, { approve: () => undefined })
    const pending = withCallback.execute([{ name: 'deploy' }])
    while (answer === undefined) await tick()
    await tick()
    answer('approve')
    assert.equal((await pending)[0].output, 'deployed', "the callback decides when the watcher gives no decision")
    abstains()
    await withCallback.close()
    await gate.close()
  })

  it("an approval the engine's time limit ends is withdrawn from the watchers", async () => {
    const clock = manualClock()
    const gate = new ToolExecutor({ clock, approvalTimeoutMs: 1_000 })
    gate.register({ name: 'deploy', needsApproval: true, handler: () => 'deployed' })
    const asked = []
    const stop = gate.watch(() => {}, { approve: (request) => { asked.push(request); return new Promise(() => {}) } })
    const pending = gate.execute([{ name: 'deploy' }])
    while (asked.length === 0) await tick()
    const [r] = await until(clock, pending)
    assert.equal(r.errorKind, 'approval_denied')
    assert.equal(asked[0].signal.aborted, true)
    assert.equal(asked[0].signal.reason, 'the approval ended')
    stop()
    await gate.close()
  })
  it("an approval ended by the gate's time limit leaves its watchers at once, though the rest of the turn runs on", async () => {
    const clock = manualClock()
    const gate = new ToolExecutor({ clock, approvalTimeoutMs: 1_000 })
    gate.register({ name: 'deploy', needsApproval: true, handler: () => 'deployed' })
    gate.register({ name: 'report', readOnly: true, timeoutMs: 60_000, handler: () => clock.sleep(10_000).then(() => 'report') })
    const asked = []
    const stop = gate.watch(() => {}, { approve: (request) => { asked.push(request); return new Promise(() => {}) } })
    const pending = gate.execute([{ name: 'report' }, { name: 'deploy' }])
    while (asked.length === 0) await tick()
    await clock.advance(1_500)
    assert.equal(asked[0].signal.aborted, true, 'withdrawn when its time ran out, not when the turn ends')
    const [report, deploy] = await until(clock, pending)
    assert.equal(report.output, 'report')
    assert.equal(deploy.errorKind, 'approval_denied')
    stop()
    await gate.close()
  })

  it('a watcher that stops while another watches no longer holds the approvals it was asked', async () => {
    const gate = new ToolExecutor({ approvalTimeoutMs: 60_000 })
    gate.register({ name: 'deploy', needsApproval: true, handler: () => 'deployed' })
    const logger = gate.watch(() => {})
    const asked = []
    const stopApprover = gate.watch(() => {}, { approve: (request) => { asked.push(request); return new Promise(() => {}) } })
    const pending = gate.execute([{ name: 'deploy' }])
    while (asked.length === 0) await tick()
    stopApprover()
    assert.equal(asked[0].signal.reason, 'watching stopped')
    const [r] = await pending
    assert.equal(r.errorKind, 'approval_denied', 'denied at once, with nobody left to answer')
    assert.match(r.error, /did not answer before watching stopped/)
    logger()
    await gate.close()
  })

  it('a watcher hears and answers only the turns begun after it came, whoever else watches', async () => {
    let release
    const gate = new ToolExecutor({ approve: () => 'deny' })
    gate.register({ name: 'deploy', needsApproval: true, check: () => new Promise((resolve) => { release = resolve }), handler: () => 'deployed' })
    const early = []
    const stopEarly = gate.watch((batch) => early.push(...batch))
    const pending = gate.execute([{ name: 'deploy' }])
    while (release === undefined) await tick()
    const late = []
    let askedLate = 0
    const stopLate = gate.watch((batch) => late.push(...batch), { approve: () => { askedLate += 1; return 'approve' } })
    release(undefined)
    const [r] = await pending
    await tick()
    assert.equal(r.errorKind, 'approval_denied', "the application's callback decided alone")
    assert.equal(askedLate, 0, 'the late watcher was not asked about a turn it never heard begin')
    assert.deepEqual(late, [], 'nor told of it')
    assert.ok(early.some((e) => e.type === 'done'))
    stopLate()
    stopEarly()
    await gate.close()
  })

  it('edits keep what was left as shown, take a changed value as given, and refuse one that still holds a redaction or a cut', async () => {
    const gate = new ToolExecutor()
    const got = []
    gate.register({ name: 'deploy', needsApproval: true, handler: (args) => { got.push(args); return 'deployed' } })
    const token = 'ghp_abcdefghijklmnopqrstuvwxyz0123456789'
    let edit
    const stop = gate.watch(() => {}, { approve: ({ arguments: shown }) => ({ decision: 'approve', arguments: edit(shown) }) })
    const run = async (args) => {
      got.length = 0
      const [r] = await gate.execute([{ name: 'deploy', arguments: args }])
      return r
    }
    const refused = (r) => {
      assert.equal(r.errorKind, 'approval_denied')
      assert.match(r.error, /shown redacted or cut/)
      assert.equal(got.length, 0, 'the handler never ran')
    }

    // A list holding a redacted item, changed: the page cannot say which real item each is.
    edit = (shown) => ({ ...shown, keys: shown.keys.slice(1) })
    refused(await run({ keys: [token, `${token.slice(0, -1)}x`] }))
    // A text holding a redaction, changed.
    edit = (shown) => ({ ...shown, cmd: shown.cmd.replace('/x/y', '/x/z') })
    refused(await run({ cmd: `git push https://${token}@example.com/x/y` }))
    // A value redacted whole (a number), changed around its placeholder.
    edit = (shown) => ({ ...shown, password: `${shown.password}-x` })
    refused(await run({ password: 12345678 }))
    // A list shown cut, appended to; and the same list given anew, whole.
    const ids = Array.from({ length: 400 }, (_, i) => `id-${i}`)
    edit = (shown) => ({ ...shown, ids: [...shown.ids, 'id-new'] })
    refused(await run({ ids }))
    edit = (shown) => ({ ...shown, ids: ['id-1', 'id-2'] })
    assert.equal((await run({ ids })).output, 'deployed')
    assert.deepEqual(got[0], { ids: ['id-1', 'id-2'] })

    // A redacted key stays the real key, with its value as edited; a real "…" key is kept; __proto__ stays a key.
    edit = (shown) => Object.fromEntries(Object.entries(shown).map(([key, value]) => [key, key === 'n' ? 2 : value === 1 ? 5 : value]))
    assert.equal((await run(JSON.parse(`{"${token}":1,"n":1,"…":"a real key","__proto__":{"region":"eu"}}`))).output, 'deployed')
    assert.deepEqual(Object.entries(got[0]), [[token, 5], ['n', 2], ['…', 'a real key'], ['__proto__', { region: 'eu' }]])
    stop()
    await gate.close()
  })

  it("a result's __proto__ key reaches the watchers as a key, as it came", async () => {
    const gate = new ToolExecutor()
    gate.register({ name: 'user', readOnly: true, handler: () => JSON.parse('{"__proto__":{"isAdmin":true},"user":"ann"}') })
    const events = []
    const stop = gate.watch((batch) => events.push(...batch))
    await gate.execute([{ name: 'user' }])
    await tick()
    const { result } = events.find((e) => e.type === 'result')
    assert.deepEqual(Object.keys(result.metadata.structured), ['__proto__', 'user'])
    assert.equal(result.metadata.structured.isAdmin, undefined, 'not a prototype')
    stop()
    await gate.close()
  })
})
