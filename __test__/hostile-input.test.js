'use strict'
// What a model (or an attacker writing as one) can send: text that JSON cannot carry as is, nesting past every
// limit, call objects that throw when read, names and keys of any length. Each becomes a result of its own; none
// runs a tool with arguments the model did not send, stalls the event loop or grows a message without bound.

const { describe, it } = require('node:test')
const assert = require('node:assert/strict')
const { gateWith, assertFailure, assertSuccess } = require('./helpers')

const echo = (seen) => ({
  name: 'echo',
  parameters: { type: 'object', properties: { q: {} } },
  handler: (args) => {
    seen.push(args)
    return 'ran'
  },
})

/** `depth` objects, each holding the next under `d`. */
const nested = (depth) => {
  let value = 'bottom'
  for (let i = 0; i < depth; i++) value = { d: value }
  return value
}

describe('arguments that JSON cannot carry as they are', () => {
  it('reads half of a surrogate pair as U+FFFD, says so, and runs with the rest of the arguments', async () => {
    const seen = []
    const { gate } = gateWith([echo(seen)])
    const results = await gate.execute([
      { type: 'tool_use', id: 'object', name: 'echo', input: { q: 'Zo\uD83D' } },
      { type: 'function_call', call_id: 'text', name: 'echo', arguments: '{"q":"Zo\uD83D"}' },
      { type: 'function_call', call_id: 'escaped', name: 'echo', arguments: '{"q":"\\udc00!"}' },
    ])
    assert.deepEqual(seen, [{ q: 'Zo\uFFFD' }, { q: 'Zo\uFFFD' }, { q: '\uFFFD!' }])
    for (const r of results) {
      assertSuccess(r)
      assert.deepEqual(r.metadata.repairs, [{ path: '', before: 1, after: '\uFFFD', rule: 'lone-surrogate' }])
      assert.ok(r.output.endsWith('[arguments adjusted before running: a lone surrogate (half of a UTF-16 pair) read as U+FFFD]'), r.output)
      assert.ok(r.metadata.stages.includes('parse:mended'))
    }
  })

  it('refuses arguments nested past the limit as invalid, without running the tool', async () => {
    const seen = []
    const { gate, calls } = gateWith([echo(seen)])
    const [object, text] = await gate.execute([
      { name: 'echo', input: { q: nested(200) } },
      { name: 'echo', arguments: JSON.stringify({ q: nested(200) }) },
    ])
    for (const r of [object, text]) assertFailure(r, 'invalid_arguments', 'more than 128 levels deep', 'nested less deeply')
    assert.equal(calls.echo, 0)
    assert.deepEqual(seen, [])
    const [fits] = await gate.execute([{ name: 'echo', input: { q: nested(100) } }])
    assertSuccess(fits, 'ran')
  })
})

describe('outputs that JSON cannot carry as they are', () => {
  it('reads half of a surrogate pair in a returned object as U+FFFD, and the call succeeds', async () => {
    const { gate } = gateWith([{ name: 'out', handler: () => ({ text: 'Zo\uD83D' }) }])
    const [r] = await gate.execute([{ name: 'out' }])
    assertSuccess(r, '{"text":"Zo\uFFFD"}')
    assert.deepEqual(r.metadata.structured, { text: 'Zo\uFFFD' })
  })

  it('passes a returned structure nested past the limit on as its JSON text', async () => {
    const value = nested(300)
    const { gate } = gateWith([{ name: 'deep', handler: () => value }])
    const [r] = await gate.execute([{ name: 'deep' }])
    assertSuccess(r, JSON.stringify(value))
    assert.equal(r.metadata.structured, undefined)
  })
})

describe('error texts the engine writes', () => {
  it('quotes a 1 MB tool name cut short, in the error, the result and the audit record', async () => {
    const records = []
    const { gate } = gateWith([{ name: 'search' }], { audit: { onRecord: (r) => records.push(r) } })
    const name = 'n'.repeat(1_000_000)
    const [r] = await gate.execute([{ id: 'long', name }])
    assertFailure(r, 'unknown_tool', `There is no tool named "${'n'.repeat(100)}…" (999900 more characters).`, 'Available tools: search.')
    assert.ok(r.error.length < 300, `${r.error.length} characters`)
    assert.equal(r.name, `${'n'.repeat(100)}…`)
    assert.ok(JSON.stringify(records[0]).length < 1_000, 'the audit line is small')
  })

  it('lists at most 20 values of a 200,000-value enum, and the count of the rest', async () => {
    const values = Array.from({ length: 200_000 }, (_, i) => `v${i}`)
    const { gate } = gateWith([{ name: 'pick', parameters: { type: 'object', properties: { v: { enum: values } }, required: ['v'] } }])
    const [r] = await gate.execute([{ name: 'pick', input: { v: 'nope' } }])
    assertFailure(r, 'invalid_arguments', `- /v: must be one of ${values.slice(0, 20).map((v) => `"${v}"`).join(', ')} and 199980 more`)
    assert.ok(r.error.length < 500, `${r.error.length} characters`)
  })

  it("names at most 20 of a model's unexpected keys, each cut short", async () => {
    const { gate } = gateWith([{ name: 'strict', parameters: { type: 'object', properties: { q: { type: 'string' } }, additionalProperties: false } }])
    const input = Object.fromEntries(Array.from({ length: 200 }, (_, i) => [`${i}_${'k'.repeat(5_000)}`, 1]))
    const [r] = await gate.execute([{ name: 'strict', input }])
    assertFailure(r, 'invalid_arguments', 'unexpected properties', ' and 180 more: remove them', '(4902 more characters)')
    assert.ok(r.error.length < 3_000, `${r.error.length} characters`)
  })

  it('holds every refusal, and the texts it quotes from the host, to maxErrorChars', async () => {
    const { gate } = gateWith([
      { name: 'checked', check: () => 'p'.repeat(1_000_000) },
      { name: 'hang', handler: () => new Promise(() => {}) },
    ], { maxErrorChars: 500 })
    const controller = new AbortController()
    const turn = gate.execute([{ name: 'checked' }, { name: 'hang' }], { signal: controller.signal })
    setTimeout(() => controller.abort(new Error(`stop ${'r'.repeat(1_000_000)}`)), 20)
    const [checked, cancelled] = await turn
    assertFailure(checked, 'invalid_arguments', 'characters omitted')
    assertFailure(cancelled, 'cancelled', 'characters omitted')
    for (const r of [checked, cancelled]) {
      assert.ok(r.error.length <= 600, `${r.error.length} characters`)
      assert.equal(r.truncated, true)
      assert.ok(r.metadata.originalChars > 1_000_000)
    }
  })
})
