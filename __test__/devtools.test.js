'use strict'
// toolgate/devtools: the server's guards (token, Host, Origin), watching only while a page is attached, bounded
// memory, approvals answered from the page, artifacts, health. The page itself is tested in __test__/browser/.

const { describe, it } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const http = require('node:http')
const os = require('node:os')
const path = require('node:path')
const { ToolExecutor } = require('..')
const { devtools } = require('../lib/devtools')
const { weatherGate } = require('./helpers.js')

/** A request to the devtools server, with the headers given (a Host of our own when asked). */
function request(dt, pathname, { method = 'GET', headers = {}, body, token = true } = {}) {
  const url = new URL(dt.url)
  const query = token ? `${pathname.includes('?') ? '&' : '?'}token=${url.searchParams.get('token')}` : ''
  return new Promise((resolve, reject) => {
    const req = http.request({ host: url.hostname, port: url.port, path: `${pathname}${query}`, method, headers }, (res) => {
      let text = ''
      res.on('data', (chunk) => { text += chunk })
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, text }))
    })
    req.on('error', reject)
    req.end(body)
  })
}

/** A page attached by its event stream: the messages it is sent, and what detaches it. */
function attach(dt) {
  const url = new URL(dt.url)
  const messages = []
  let buffer = ''
  let res
  const opened = new Promise((resolve) => {
    http.get({ host: url.hostname, port: url.port, path: `/events?token=${url.searchParams.get('token')}` }, (r) => {
      res = r
      r.on('data', (chunk) => {
        buffer += chunk
        let end
        while ((end = buffer.indexOf('\n\n')) >= 0) {
          const data = buffer.slice(0, end).split('\n').filter((line) => line.startsWith('data: ')).map((line) => line.slice(6)).join('\n')
          messages.push(JSON.parse(data))
          buffer = buffer.slice(end + 2)
        }
      })
      resolve()
    })
  })
  const until = async (found, what) => {
    for (let i = 0; i < 200; i++) {
      const hit = found(messages)
      if (hit) return hit
      await new Promise((resolve) => setTimeout(resolve, 10))
    }
    assert.fail(`the page was never sent ${what}: ${JSON.stringify(messages).slice(0, 2000)}`)
  }
  return { messages, opened, until, detach: () => res.destroy() }
}

const eventsOf = (messages) => messages.filter((m) => m.type === 'events').flatMap((m) => m.batches.flatMap(([, events]) => events))

describe('devtools server', () => {
  it('refuses a request without the token, from another Host or from another Origin, and serves the page with it', async (t) => {
    const dt = await devtools(weatherGate())
    t.after(() => dt.close())
    assert.match(dt.url, /^http:\/\/127\.0\.0\.1:\d+\/\?token=[\w-]{32}$/)
    assert.equal((await request(dt, '/', { token: false })).status, 401)
    assert.equal((await request(dt, '/?token=wrong', { token: false })).status, 401)
    const port = new URL(dt.url).port
    assert.equal((await request(dt, '/', { headers: { host: `attacker.example:${port}` } })).status, 403, 'a rebound name is refused')
    assert.equal((await request(dt, '/', { headers: { host: `localhost:${port}` } })).status, 200)
    assert.equal((await request(dt, '/health', { headers: { origin: 'http://attacker.example' } })).status, 403)
    const page = await request(dt, '/')
    assert.equal(page.status, 200)
    assert.match(page.headers['content-security-policy'], /default-src 'none'/)
    assert.ok(!/https?:\/\/(?!127)/.test(page.text), 'the page names no other address')
    for (const asset of ['/page.js', '/page.css', '/state.js']) {
      const res = await request(dt, asset)
      assert.equal(res.status, 200, asset)
      assert.ok(!/https?:\/\//.test(res.text), `${asset} fetches nothing from any network`)
    }
  })

  it('checks its options', async () => {
    const gate = weatherGate()
    await assert.rejects(devtools({}), /give a ToolExecutor/)
    await assert.rejects(devtools({ watch() {}, stats() {} }), /give a ToolExecutor of this toolgate/, 'one without inspect() and the rest')
    await assert.rejects(devtools([gate, gate]), /the same gate is given twice/)
    await assert.rejects(devtools(gate, { port: -1 }), /port must be/)
    await assert.rejects(devtools(gate, { keepTurns: 0 }), /keepTurns must be/)
    await assert.rejects(devtools(gate, { approval: true }), /unknown option "approval"/)
  })

  it('watches only while a page is attached, and keeps what it saw for the next page', async (t) => {
    const gate = weatherGate()
    const watch = gate.watch.bind(gate)
    let watching = 0
    gate.watch = (...args) => {
      watching += 1
      const stop = watch(...args)
      return () => { watching -= 1; stop() }
    }
    const dt = await devtools(gate)
    t.after(() => dt.close())
    await gate.execute([{ name: 'get_weather', arguments: { city: 'Oslo' } }])
    assert.equal(watching, 0, 'no page, no watcher')
    const page = attach(dt)
    await page.opened
    await page.until((m) => m[0]?.type === 'snapshot', 'a snapshot')
    assert.equal(page.messages[0].turns.length, 0, 'nothing was captured before the page came')
    assert.equal(watching, 1)
    await gate.execute([{ id: 'c1', name: 'get_weather', arguments: { city: 'Paris' } }])
    const result = await page.until((m) => eventsOf(m).find((e) => e.type === 'result'), 'the result')
    assert.equal(result.result.output, 'sunny in Paris')
    page.detach()
    await new Promise((resolve) => setTimeout(resolve, 200))
    assert.equal(watching, 1, 'for a page that reloads, watching goes on a little')
    for (let i = 0; i < 300 && watching > 0; i++) await new Promise((resolve) => setTimeout(resolve, 10))
    assert.equal(watching, 0, 'then ends, the last page gone')
    const next = attach(dt)
    await next.opened
    const snapshot = await next.until((m) => m[0], 'a snapshot')
    assert.deepEqual(snapshot.turns.map((turn) => turn.calls.map((c) => [c.name, c.result.output])), [[['get_weather', 'sunny in Paris']]])
    next.detach()
  })

  it('shows several gates on one page, each turn with the gate that ran it', async (t) => {
    const first = weatherGate()
    const second = weatherGate()
    const dt = await devtools([first, second])
    t.after(() => dt.close())
    const page = attach(dt)
    await page.opened
    await second.execute([{ name: 'get_weather', arguments: { city: 'Oslo' } }])
    await first.execute([{ name: 'get_weather', arguments: { city: 'Rome' } }])
    await page.until((m) => eventsOf(m).filter((e) => e.type === 'done').length === 2, 'both turns')
    const gates = page.messages.filter((m) => m.type === 'events').flatMap((m) => m.batches.map(([gate, events]) => [gate, events.find((e) => e.type === 'result')?.result.output])).filter(([, output]) => output)
    assert.deepEqual(gates, [[1, 'sunny in Oslo'], [0, 'sunny in Rome']])
    page.detach()
    const next = attach(dt)
    await next.opened
    const { turns } = await next.until((m) => m[0], 'a snapshot')
    assert.deepEqual(turns.map((turn) => [turn.gate, turn.calls[0].result.output]), [[1, 'sunny in Oslo'], [0, 'sunny in Rome']])
    next.detach()
  })

  it('keeps at most keepTurns turns, and caps what it keeps of each call', async (t) => {
    const gate = new ToolExecutor()
    gate.register({ name: 'big', readOnly: true, handler: () => 'x'.repeat(200_000) })
    const dt = await devtools(gate, { keepTurns: 3 })
    t.after(() => dt.close())
    const page = attach(dt)
    await page.opened
    for (let i = 0; i < 8; i++) await gate.execute([{ name: 'big', arguments: { blob: 'y'.repeat(50_000), i } }])
    await page.until((m) => eventsOf(m).filter((e) => e.type === 'done').length === 8, 'every turn')
    page.detach()
    const next = attach(dt)
    await next.opened
    const { turns, forgotten } = await next.until((m) => m[0], 'a snapshot')
    assert.equal(turns.length, 3)
    assert.equal(forgotten, 5)
    const call = turns[2].calls[0]
    assert.ok(call.args.length < 9_000, `arguments capped (${call.args.length})`)
    assert.ok(call.result.output.length < 17_000, `output capped (${call.result.output.length})`)
    assert.ok(JSON.stringify(turns).length < 3 * 40_000, 'each kept turn is small')
    next.detach()
  })

  it('tells pages to start over when a burst is more than they can follow, and keeps a bounded part of a huge turn', async (t) => {
    const gate = new ToolExecutor({ concurrency: 64 })
    gate.register({ name: 'inc', readOnly: true, handler: ({ n }) => n + 1 })
    const dt = await devtools(gate)
    t.after(() => dt.close())
    const page = attach(dt)
    await page.opened
    const results = await gate.execute(Array.from({ length: 3_000 }, (_, n) => ({ name: 'inc', arguments: { n } })))
    assert.equal(results.length, 3_000)
    await page.until((m) => m.find((x) => x.type === 'resync'), 'that it should start over')
    page.detach()
    const next = attach(dt)
    await next.opened
    const { turns } = await next.until((m) => m[0], 'a snapshot')
    assert.equal(turns.length, 1)
    assert.equal(turns[0].calls.length, 500, 'the calls kept of one turn')
    assert.equal(turns[0].callsNotKept, 2_500)
    assert.ok(turns[0].done, 'the turn is known to be done')
    assert.equal(turns[0].calls[499].result.output, '500')
    next.detach()
  })

  it('keeps of a result what the page explains when its metadata is large, and never the stack or the value again', () => {
    const state = require('../lib/devtools/state.js')
    const big = 'e'.repeat(100_000)
    const kept = state.compactResult({
      callId: 'c', name: 't', success: false, output: 'o', error: 'x'.repeat(50_000), errorKind: 'handler_error', attempts: 1,
      metadata: { stderr: big, stack: 'at secret/path.js', structured: { v: 1 }, permission: { decision: 'allowed', by: 'rule' }, stages: [{ station: 'invoke', outcome: 'threw' }] },
    })
    assert.equal(kept.metadataCut, true)
    assert.deepEqual(Object.keys(kept.metadata).sort(), ['permission', 'stages'])
    assert.ok(kept.error.length < 9_000)
    const small = state.compactResult({ callId: 'c', name: 't', success: true, output: 'o', metadata: { stderr: 'fine', stack: 's', structured: 1, stages: [] } })
    assert.equal(small.metadataCut, false)
    assert.deepEqual(small.metadata, { stderr: 'fine', stages: [] })
    const huge = state.compactResult({ callId: 'c', name: 't', success: true, output: 'o', metadata: { repairs: [{ path: '/a', before: big, after: big, rule: 'json-string' }] } })
    assert.ok(JSON.stringify(huge).length < 20_000, 'an explained part too large is kept as capped text')
  })

  it('asks an attached page for approvals beside the application, and serves only artifacts a kept call names', async (t) => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'toolgate-devtools-'))
    t.after(() => fs.rmSync(dir, { recursive: true, force: true }))
    const gate = new ToolExecutor({ artifacts: { dir }, maxOutputChars: 1000 })
    gate.register({ name: 'deploy', needsApproval: true, handler: ({ env }) => `deployed to ${env}` })
    gate.register({ name: 'dump', readOnly: true, handler: () => 'line\n'.repeat(2000) })
    const dt = await devtools(gate, { approvals: true })
    t.after(() => dt.close())
    const page = attach(dt)
    await page.opened
    const pending = gate.execute([{ name: 'deploy', arguments: { env: 'staging', token: 'ghp_abcdefghijklmnopqrstuvwxyz0123456789' } }])
    const { approval } = await page.until((m) => m.find((x) => x.type === 'approval'), 'the approval')
    assert.equal(approval.toolName, 'deploy')
    assert.ok(!approval.args.includes('ghp_abcdefghijklmnopqrstuvwxyz0123456789'), 'the page sees arguments redacted')
    const bad = await request(dt, '/approve', { method: 'POST', body: JSON.stringify({ id: approval.id, decision: 'approve', arguments: [1] }) })
    assert.equal(bad.status, 400)
    const answered = await request(dt, '/approve', { method: 'POST', body: JSON.stringify({ id: approval.id, decision: 'approve', arguments: { env: 'prod' } }) })
    assert.equal(answered.status, 200, answered.text)
    const [result] = await pending
    assert.equal(result.output, 'deployed to prod', 'the edited arguments ran')
    assert.equal(result.metadata.permission.decision, 'approved')
    await page.until((m) => m.find((x) => x.type === 'approval_done' && x.id === approval.id), 'that the approval is done')
    assert.equal((await request(dt, '/approve', { method: 'POST', body: JSON.stringify({ id: approval.id, decision: 'deny' }) })).status, 409)

    const [dumped] = await gate.execute([{ name: 'dump' }])
    assert.ok(dumped.metadata.artifactPath)
    await page.until((m) => eventsOf(m).find((e) => e.type === 'result' && e.result.metadata.artifactPath), 'the dump')
    const served = await request(dt, `/artifact?path=${encodeURIComponent(dumped.metadata.artifactPath)}`)
    assert.equal(served.status, 200)
    assert.equal(served.text, 'line\n'.repeat(2000))
    assert.equal((await request(dt, `/artifact?path=${encodeURIComponent('/etc/passwd')}`)).status, 404, 'no other file')
    page.detach()
  })

  it('without approvals, a page attached answers nothing and calls without a callback are denied as before', async (t) => {
    const gate = new ToolExecutor()
    gate.register({ name: 'deploy', needsApproval: true, handler: () => 'deployed' })
    const dt = await devtools(gate)
    t.after(() => dt.close())
    const page = attach(dt)
    await page.opened
    const [result] = await gate.execute([{ name: 'deploy' }])
    assert.equal(result.errorKind, 'approval_denied')
    assert.ok(!page.messages.some((m) => m.type === 'approval'))
    assert.equal((await request(dt, '/approve', { method: 'POST', body: '{}' })).status, 403)
    page.detach()
  })

  it("the page's approval and the application's: the first answer decides", async (t) => {
    let release
    const gate = new ToolExecutor({ approve: () => new Promise((resolve) => { release = resolve }) })
    gate.register({ name: 'deploy', needsApproval: true, handler: () => 'deployed' })
    const dt = await devtools(gate, { approvals: true })
    t.after(() => dt.close())
    const page = attach(dt)
    await page.opened
    const pending = gate.execute([{ name: 'deploy' }])
    const { approval } = await page.until((m) => m.find((x) => x.type === 'approval'), 'the approval')
    release({ decision: 'deny', reason: 'the app said no' })
    const [result] = await pending
    assert.equal(result.errorKind, 'approval_denied')
    assert.match(result.error, /the app said no/)
    await page.until((m) => m.find((x) => x.type === 'approval_done' && x.id === approval.id), 'that the page is no longer asked')
    page.detach()
  })

  it('closed while an approval waits on it, withdraws it: the call is denied at once, or the callback decides', async () => {
    const gate = new ToolExecutor({ approvalTimeoutMs: 600_000 })
    gate.register({ name: 'deploy', needsApproval: true, handler: () => 'deployed' })
    const dt = await devtools(gate, { approvals: true })
    const page = attach(dt)
    await page.opened
    const pending = gate.execute([{ name: 'deploy' }])
    await page.until((m) => m.find((x) => x.type === 'approval'), 'the approval')
    await dt.close()
    const [result] = await pending
    assert.equal(result.errorKind, 'approval_denied')
    assert.match(result.error, /did not answer before watching stopped/)

    let release
    const withCallback = new ToolExecutor({ approve: () => new Promise((resolve) => { release = resolve }) })
    withCallback.register({ name: 'deploy', needsApproval: true, handler: () => 'deployed' })
    const again = await devtools(withCallback, { approvals: true })
    const second = attach(again)
    await second.opened
    const waiting = withCallback.execute([{ name: 'deploy' }])
    await second.until((m) => m.find((x) => x.type === 'approval'), 'the approval')
    await again.close()
    release('approve')
    assert.equal((await waiting)[0].output, 'deployed', "the application's callback still decides")
  })

  it("an approval the gate's time limit ended leaves the page: it is told, and answering it is refused", async (t) => {
    const gate = new ToolExecutor({ approvalTimeoutMs: 200 })
    gate.register({ name: 'deploy', needsApproval: true, handler: () => 'deployed' })
    const dt = await devtools(gate, { approvals: true })
    t.after(() => dt.close())
    const page = attach(dt)
    await page.opened
    const [result] = await gate.execute([{ name: 'deploy' }])
    assert.equal(result.errorKind, 'approval_denied')
    const { approval } = page.messages.find((m) => m.type === 'approval')
    await page.until((m) => m.find((x) => x.type === 'approval_done' && x.id === approval.id), 'that the approval is over')
    assert.equal((await request(dt, '/approve', { method: 'POST', body: JSON.stringify({ id: approval.id, decision: 'approve' }) })).status, 409)
    page.detach()
  })

  it('a page reloaded while a call runs follows it to its end', async (t) => {
    let finish
    const gate = new ToolExecutor()
    gate.register({ name: 'slow', readOnly: true, handler: () => new Promise((resolve) => { finish = resolve }) })
    const dt = await devtools(gate)
    t.after(() => dt.close())
    const page = attach(dt)
    await page.opened
    const pending = gate.execute([{ name: 'slow' }])
    await page.until((m) => eventsOf(m).find((e) => e.type === 'start'), 'the start')
    page.detach()
    await new Promise((resolve) => setTimeout(resolve, 100))
    finish('done')
    await pending
    const reloaded = attach(dt)
    await reloaded.opened
    const { turns } = await reloaded.until((m) => m[0], 'a snapshot')
    assert.ok(turns[0].done, 'the turn ended while no page was open, and the server heard it')
    assert.equal(turns[0].calls[0].result.output, 'done')
    reloaded.detach()
  })

  it('health shows no call id or secret-named field value, and a gate that fails to report is a 500, not a crash', async (t) => {
    let finish
    const gate = new ToolExecutor()
    gate.register({ name: 'slow', readOnly: true, rateLimit: { limit: '5/min', key: 'apiKey' }, handler: () => new Promise((resolve) => { finish = resolve }) })
    const dt = await devtools(gate)
    t.after(() => dt.close())
    const secret = 'sk-proj-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789abcd'
    const pending = gate.execute([{ id: `call_${secret}`, name: 'slow' }], { context: { apiKey: 'k7Qm29xLp0aZ' } })
    while (finish === undefined) await new Promise((resolve) => setImmediate(resolve))
    const health = await request(dt, '/health')
    assert.equal(health.status, 200)
    assert.match(health.text, /"toolName":"slow"/)
    assert.ok(!health.text.includes('sk-proj-AbCd') && !health.text.includes('k7Qm29xLp0aZ'), health.text)
    finish('ok')
    await pending
    gate.inspect = () => { throw new Error('inspect broke') }
    const broken = await request(dt, '/health')
    assert.equal(broken.status, 500)
    assert.match(broken.text, /inspect broke/)
  })

  it('shows health: stats, the health report, breakers and what the memory store holds', async (t) => {
    const gate = new ToolExecutor()
    gate.register({ name: 'flaky', readOnly: true, retry: false, breaker: { failureRate: 0.5, minCalls: 2, openMs: 60_000 }, handler: () => { throw new Error('down') } })
    const dt = await devtools(gate)
    t.after(() => dt.close())
    await gate.execute([{ name: 'flaky' }])
    await gate.execute([{ name: 'flaky' }])
    const [health] = JSON.parse((await request(dt, '/health')).text)
    assert.equal(health.stats.tools.flaky.calls, 2)
    assert.equal(health.health.tools.flaky.breaker, 'open')
    assert.equal(health.inspect.breakers.flaky.state, 'open')
    assert.ok(health.inspect.breakers.flaky.halfOpenInMs > 50_000)
    assert.equal(health.inspect.store, 'memory')
  })
})
