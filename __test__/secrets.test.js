'use strict'
// Secrets where a model, a handler or the caller puts them outside the usual places: in a tool name, an argument
// key, an output object's key, an abort reason, a secret-named field that also holds a token or a redaction marker,
// a binary result that is text. None reaches a result, a trace event or an audit record in clear.

const { describe, it } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const { gateWith, assertFailure, assertSuccess, sleep } = require('./helpers')

const TOKEN = `ghp_${'Zq4R8sT2vW6xY1bN3mK5pL7jH9gF0dC2aE4x'}`

/** An executor that keeps its trace events and audit records, and everything it produced as one text to search. */
function observed(tools, options = {}) {
  const seen = { events: [], records: [] }
  const { gate, calls } = gateWith(tools, {
    ...options,
    onTrace: (batch) => seen.events.push(...batch),
    audit: { onRecord: (record) => seen.records.push(record) },
  })
  const everything = async (results) => {
    await sleep(20) // trace batches arrive on a later turn of the event loop
    return JSON.stringify({ results, ...seen })
  }
  return { gate, calls, everything }
}

describe('secrets outside the usual places', () => {
  it("redacts a call id where it is shown or names something: artifacts, traces, audit, errors; the result keeps it", async () => {
    const id = `call_${TOKEN}`
    const { gate, everything } = observed([
      { name: 'dump', readOnly: true, handler: () => 'y'.repeat(500) },
      { name: 'fail', handler: () => { throw new Error('no') } },
      { name: 'after' },
      { name: 'stuck', readOnly: true, timeoutMs: 30, handler: () => new Promise((resolve) => setTimeout(resolve, 80, 'late')) },
    ], { maxOutputChars: 100 })
    const results = await gate.execute([{ id, name: 'dump' }, { id, name: 'stuck' }, { id, name: 'fail' }, { id: 'c4', name: 'after' }], { stopOnError: true })
    assert.deepEqual(results.map((r) => r.callId), [id, id, id, 'c4'], 'the result pairs with its call by the id as sent')
    assert.equal(results[0].truncated, true)
    assert.ok(!results[0].metadata.artifactPath.includes(TOKEN), results[0].metadata.artifactPath)
    assertFailure(results[1], 'timeout')
    assertFailure(results[3], 'not_executed', 'call call_[REDACTED:github-token] ("fail") before it failed')
    await sleep(120) // the late settlement's trace event
    const text = await everything(results.map((r) => ({ ...r, callId: undefined })))
    assert.ok(!text.includes(TOKEN), text.slice(text.indexOf(TOKEN) - 200, text.indexOf(TOKEN) + 50))
    assert.match(text, /"type":"station","traceId":"[^"]+","callId":"call_\[REDACTED:github-token\]"/)
    assert.match(text, /"records":\[\{"traceId":"[^"]+","callId":"call_\[REDACTED:github-token\]"/)
    assert.match(text, /"type":"late_settlement","callId":"call_\[REDACTED:github-token\]"/)
  })

  it('redacts progress reports and caps their size before any listener sees them', async () => {
    const heard = { executor: [], turn: [] }
    const plain = { stage: 'reading', done: 1 }
    const { gate } = gateWith([{ name: 'job', handler: (_a, ctx) => {
      ctx.progress(`token ${TOKEN} found`)
      ctx.progress({ stage: 'auth', header: `Bearer ${TOKEN}`, [TOKEN]: 1 })
      ctx.progress('x'.repeat(100_000))
      ctx.progress(plain)
      ctx.progress(7)
      // What its JSON would not show: an Error's message, a getter, toJSON.
      ctx.progress(new Error(`retrying with ${TOKEN}`))
      ctx.progress(Object.create({ get message() { return `using ${TOKEN}` } }))
      ctx.progress({ message: `auth ${TOKEN}`, toJSON: () => ({ stage: 'auth' }) })
      return 'done'
    } }], { onProgress: (event) => heard.executor.push(event.info) })
    assertSuccess((await gate.execute([{ name: 'job' }], { onProgress: (event) => heard.turn.push(event.info) }))[0], 'done')
    for (const seen of [heard.executor, heard.turn]) {
      assert.equal(seen.length, 8)
      assert.ok(!JSON.stringify(seen).includes(TOKEN), JSON.stringify(seen).slice(0, 500))
      assert.equal(seen[0], 'token [REDACTED:github-token] found')
      assert.equal(seen[1].stage, 'auth')
      assert.match(seen[1].header, /REDACTED/)
      assert.ok(JSON.stringify(seen[2]).length <= 2_000, `cut to the cap: ${JSON.stringify(seen[2]).length}`)
      assert.deepEqual(seen[3], plain, 'a report with nothing to change reads as it was given')
      assert.notEqual(seen[3], plain, 'as its JSON, not the object')
      assert.equal(seen[4], 7)
      assert.deepEqual(seen[5], { name: 'Error', message: 'retrying with [REDACTED:github-token]' })
      assert.deepEqual(seen.slice(6), [{}, { stage: 'auth' }])
    }
  })

  it('redacts a token used as a tool name, an argument key and an abort reason, everywhere', async () => {
    const { gate, everything } = observed([
      { name: 'strict', parameters: { type: 'object', properties: { q: { type: 'string' } }, additionalProperties: false } },
      { name: 'hang', handler: () => new Promise(() => {}) },
    ])
    const controller = new AbortController()
    const turn = gate.execute([{ name: TOKEN }, { name: 'strict', input: { [TOKEN]: 'v' } }, { name: 'hang' }], { signal: controller.signal })
    setTimeout(() => controller.abort(new Error(`stopped with ${TOKEN}`)), 20)
    const [unknown, strict, hang] = await turn
    assertFailure(unknown, 'unknown_tool', 'There is no tool named "[REDACTED:github-token]"')
    assert.equal(unknown.name, '[REDACTED:github-token]')
    assertFailure(strict, 'invalid_arguments', 'unexpected property "[REDACTED:github-token]"')
    assertFailure(hang, 'cancelled', 'stopped with [REDACTED:github-token]')
    for (const r of [unknown, strict, hang]) assert.equal(r.metadata.redactions['github-token'] >= 1, true)
    const all = await everything([unknown, strict, hang])
    assert.ok(all.includes('[REDACTED:github-token]'), 'the events and records are there')
    assert.ok(!all.includes(TOKEN.slice(4)), 'and none holds the token')
  })

  it('redacts the keys of a returned object, in the output and the structure', async () => {
    const { gate, everything } = observed([{ name: 'keys', handler: () => ({ [TOKEN]: 1, plain: 2 }) }])
    const [r] = await gate.execute([{ name: 'keys' }])
    assertSuccess(r, '{"[REDACTED:github-token]":1,"plain":2}')
    assert.deepEqual(r.metadata.structured, { '[REDACTED:github-token]': 1, plain: 2 })
    assert.ok(!(await everything([r])).includes(TOKEN.slice(4)))
  })

  it('redacts a secret-named field whole when it also holds a token or a redaction marker', async () => {
    const { gate } = gateWith([{
      name: 'account',
      handler: () => ({ password: `hunter2hunter2 ${TOKEN}`, pwd: '[REDACTED:x] realsecretvalue99', token: TOKEN }),
    }])
    const [r] = await gate.execute([{ name: 'account' }])
    assert.deepEqual(r.metadata.structured, {
      password: '[REDACTED:secret-field]',
      pwd: '[REDACTED:secret-field]',
      token: '[REDACTED:github-token]', // nothing but a secret the rules name: named by its rule
    })
    assert.ok(!r.output.includes('hunter2') && !r.output.includes('realsecretvalue99'))
  })

  it('redacts a binary result that is text before saving it, and saves other bytes as they are', async () => {
    const png = Buffer.concat([Buffer.from('\x89PNG\r\n\x1a\n', 'latin1'), Buffer.from(`tEXt ${TOKEN}`)])
    const { gate } = gateWith([
      { name: 'text', handler: () => Buffer.from(`token=${TOKEN}\n`) },
      { name: 'image', handler: () => png },
    ])
    const [text, image] = await gate.execute([{ name: 'text' }, { name: 'image' }])
    const saved = fs.readFileSync(text.metadata.artifactPath, 'utf8')
    assert.equal(saved, 'token=[REDACTED:github-token]\n')
    assert.equal(text.metadata.binary.bytes, Buffer.byteLength(saved))
    assert.deepEqual(text.metadata.redactions, { 'github-token': 1 })
    assert.ok(text.output.includes(`${Buffer.byteLength(saved)} bytes, text/plain`), text.output)
    assert.deepEqual(fs.readFileSync(image.metadata.artifactPath), png, 'an image is not cut into')
    assert.equal(image.metadata.redactions, undefined)
  })

  it('redacts a token whole before a long name or key quoting it is cut short', async () => {
    const { gate, everything } = observed([{ name: 'strict', parameters: { type: 'object', properties: { q: { type: 'string' } }, additionalProperties: false } }])
    // Past 80 characters: the quote's cut falls inside the token.
    const results = await gate.execute([{ name: `${'a'.repeat(70)}-${TOKEN}` }, { name: 'strict', input: { [`${'k'.repeat(70)}-${TOKEN}`]: 1 } }])
    assertFailure(results[0], 'unknown_tool', '[REDACTED:github-token]')
    assertFailure(results[1], 'invalid_arguments', '[REDACTED:github-token]')
    const all = await everything(results)
    assert.ok(!all.includes(TOKEN.slice(4, 20)), 'no part of the token is left')
  })
})
