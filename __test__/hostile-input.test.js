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
