'use strict'
// A turn's results cross from the engine in a compact form for the common case; what reaches the caller must be
// the same object, key for key and in the same order, as any other result.
const { describe, it } = require('node:test')
const assert = require('node:assert/strict')
const { ToolExecutor, RetryableError } = require('..')

const schema = { type: 'object', properties: { n: { type: 'integer' } } }

describe('results as the caller sees them', () => {
  it('a plain success has its fields in the documented order', async () => {
    const gate = new ToolExecutor()
    gate.register({ name: 'inc', readOnly: true, parameters: schema, handler: async ({ n }) => ({ n: n + 1 }) })
    const [r] = await gate.execute([{ type: 'function_call', call_id: 'c1', name: 'inc', arguments: '{"n":1}' }])
    assert.deepEqual(Object.keys(r), ['callId', 'name', 'success', 'output', 'retryable', 'latencyMs', 'attempts', 'cached', 'truncated', 'metadata'])
    assert.deepEqual(Object.keys(r.metadata), ['structured', 'stages', 'startedAt', 'queuedMs'])
    assert.deepEqual(
      { ...r, latencyMs: 0, metadata: { ...r.metadata, startedAt: 0, queuedMs: 0 } },
      {
        callId: 'c1', name: 'inc', success: true, output: '{"n":2}', retryable: false, latencyMs: 0, attempts: 1, cached: false, truncated: false,
        metadata: {
          structured: { n: 2 },
          stages: ['lookup:found', 'parse:ok', 'validate:ok', 'permission:allowed', 'invoke:returned', 'normalize:structured', 'shape:ok'],
          startedAt: 0,
          queuedMs: 0,
        },
      },
    )
    assert.ok(r.latencyMs >= 0 && r.metadata.startedAt > 1.7e12 && r.metadata.queuedMs >= 0)
  })

  it('a text success has no structured value; a cached one and a redacted one say so', async () => {
    const gate = new ToolExecutor()
    gate.register({ name: 'echo', readOnly: true, idempotent: true, cache: { ttlMs: 60_000 }, parameters: { type: 'object', properties: { s: { type: 'string' } } }, handler: async ({ s }) => s })
    const secret = `token ghp_${'a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8'}`
    const call = (id, s) => ({ type: 'function_call', call_id: id, name: 'echo', arguments: JSON.stringify({ s }) })
    const [first] = await gate.execute([call('a', 'hello')])
    const [again] = await gate.execute([call('b', 'hello')])
    const [hidden] = await gate.execute([call('c', secret)])
    assert.equal('structured' in first.metadata, false)
    assert.equal(first.output, 'hello')
    assert.equal(first.cached, false)
    assert.equal(again.cached, true)
    assert.equal(again.callId, 'b')
    assert.equal(hidden.output, 'token [REDACTED:github-token]')
    assert.deepEqual(hidden.metadata.redactions, { 'github-token': 1 })
    assert.deepEqual(Object.keys(hidden.metadata), ['redactions', 'stages', 'startedAt', 'queuedMs'])
  })

  it('a failure keeps its error fields', async () => {
    const gate = new ToolExecutor()
    gate.register({ name: 'fail', parameters: schema, handler: async () => { throw new Error('boom') } })
    const [r] = await gate.execute([{ type: 'function_call', call_id: 'c1', name: 'fail', arguments: '{}' }])
    assert.equal(r.success, false)
    assert.equal(r.errorKind, 'handler_error')
    assert.match(r.error, /boom/)
    assert.deepEqual(Object.keys(r).slice(0, 6), ['callId', 'name', 'success', 'output', 'error', 'errorKind'])
  })

  it('an output that is not the text its own handler sent crosses whole: shared, retried, fenced', async () => {
    const gate = new ToolExecutor()
    let runs = 0
    gate.register({ name: 'page', readOnly: true, idempotent: true, cache: { ttlMs: 60_000 }, parameters: schema, handler: async ({ n }) => `page ${n} (run ${++runs})` })
    let attempts = 0
    gate.register({
      name: 'flaky', readOnly: true, parameters: schema, retry: { initialDelayMs: 1 },
      handler: async () => {
        if (++attempts === 1) throw new RetryableError('try again')
        return 'second attempt'
      },
    })
    gate.register({ name: 'web', readOnly: true, untrusted: true, parameters: schema, handler: async () => 'a page' })
    const call = (id, name, n) => ({ type: 'function_call', call_id: id, name, arguments: JSON.stringify({ n }) })
    const [a, b, flaky, web] = await gate.execute([call('a', 'page', 1), call('b', 'page', 1), call('f', 'flaky', 0), call('w', 'web', 0)])
    assert.equal(runs, 1, 'the identical call shared the first one\'s run')
    assert.equal(a.output, 'page 1 (run 1)')
    assert.equal(b.output, 'page 1 (run 1)')
    assert.equal(b.metadata.sharedFlight, true)
    assert.equal(flaky.output, 'second attempt')
    assert.equal(flaky.attempts, 2)
    assert.match(web.output, /a page/)
    assert.notEqual(web.output, 'a page', 'an untrusted output is fenced')
  })

  it('a traced success carries its stage timings and starts after the other metadata', async () => {
    const gate = new ToolExecutor({ trace: true })
    gate.register({ name: 'inc', readOnly: true, parameters: schema, handler: async ({ n }) => n + 1 })
    const [r] = await gate.execute([{ type: 'function_call', call_id: 'c1', name: 'inc', arguments: '{"n":1}' }])
    assert.equal(r.output, '2')
    assert.deepEqual(Object.keys(r.metadata), ['structured', 'stages', 'startedAt', 'queuedMs', 'timings', 'starts'])
    assert.equal(r.metadata.timings.length, r.metadata.stages.length)
    assert.ok(r.metadata.timings.every((t, i) => t >= 0 && (i === 0 || t >= r.metadata.timings[i - 1])), String(r.metadata.timings))
    assert.equal(r.metadata.starts.length, 1)
  })

  it('a long output the limit lets through whole crosses back whole', async () => {
    const gate = new ToolExecutor({ maxOutputChars: 1_000_000 })
    const text = 'x'.repeat(300_000) + '\uD800' // long enough to cross in slices, with a lone surrogate at the end
    gate.register({ name: 'long', readOnly: true, parameters: schema, handler: async () => text })
    const [r] = await gate.execute([{ type: 'function_call', call_id: 'c1', name: 'long', arguments: '{}' }])
    assert.equal(r.truncated, false)
    assert.equal(r.output, 'x'.repeat(300_000) + '\uFFFD')
  })
})
