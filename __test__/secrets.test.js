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
