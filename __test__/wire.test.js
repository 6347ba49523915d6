'use strict'
// A turn's results cross from the engine in a compact form for the common case; what reaches the caller must be
// the same object, key for key and in the same order, as any other result.
const { describe, it } = require('node:test')
const assert = require('node:assert/strict')
const { ToolExecutor } = require('..')

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
})
