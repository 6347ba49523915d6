'use strict'
// The scheduler of one turn: consecutive read-only calls overlap (up to `concurrency`), any other call runs alone.
// Scheduling is asserted from recorded start/end events, never from durations.

const { describe, it } = require('node:test')
const assert = require('node:assert/strict')
const { gateWith, assertSuccess, assertFailure, recorder, sleep, deferred, never } = require('./helpers')

const ID = { type: 'object', properties: { id: { type: 'string' }, ms: { type: 'integer' } }, required: ['id'] }

/** `read` (read-only) and `write` both record start/end events into one recorder. */
function tools(options) {
  const rec = recorder()
  const { gate, calls } = gateWith([
    { name: 'read', readOnly: true, parameters: ID, handler: rec.handler(30) },
    { name: 'write', parameters: ID, handler: rec.handler(30) },
  ], options)
  return { gate, calls, rec }
}

const read = (id, ms) => ({ name: 'read', input: ms === undefined ? { id } : { id, ms } })
const write = (id, ms) => ({ name: 'write', input: ms === undefined ? { id } : { id, ms } })

describe('scheduling', () => {
  it('runs consecutive read-only calls together: every start comes before any end', async () => {
    const { gate, rec } = tools()
    const results = await gate.execute([read('a'), read('b'), read('c')])
    assert.deepEqual(results.map((r) => r.output), ['a', 'b', 'c'])
    assert.deepEqual(rec.events.slice(0, 3), ['start:a', 'start:b', 'start:c'])
    assert.equal(rec.maxRunning, 3)
  })

  it('runs a call that is not read-only alone, after the batch before it and before the calls after it', async () => {
    const { gate, rec } = tools()
    const results = await gate.execute([read('r1'), read('r2'), write('w'), read('r3'), read('r4')])
    assert.deepEqual(results.map((r) => r.output), ['r1', 'r2', 'w', 'r3', 'r4'])
    const at = rec.index
    // r1 ‖ r2, then w alone, then r3 ‖ r4.
    assert.ok(at('start:r2') < at('end:r1') && at('start:r1') < at('end:r2'), rec.events.join(' '))
    assert.deepEqual(rec.events.slice(at('start:w'), at('end:w') + 1), ['start:w', 'end:w'], 'nothing else runs during the write')
    assert.ok(at('end:r1') < at('start:w') && at('end:r2') < at('start:w'), rec.events.join(' '))
    assert.ok(at('end:w') < at('start:r3') && at('end:w') < at('start:r4'), rec.events.join(' '))
    assert.ok(at('start:r4') < at('end:r3'), 'the reads after the write overlap again')
  })

  it('runs consecutive writes one at a time, in input order', async () => {
    const { gate, rec } = tools()
    await gate.execute([write('w1', 20), write('w2', 1), write('w3', 10)])
    assert.deepEqual(rec.events, ['start:w1', 'end:w1', 'start:w2', 'end:w2', 'start:w3', 'end:w3'])
    assert.equal(rec.maxRunning, 1)
  })

  it('never runs more than `concurrency` read-only calls at once', async () => {
    const { gate, rec } = tools({ concurrency: 2 })
    const ids = ['a', 'b', 'c', 'd', 'e', 'f']
    const results = await gate.execute(ids.map((id, i) => read(id, 10 + (i % 3) * 10)))
    assert.deepEqual(results.map((r) => r.output), ids)
    assert.equal(rec.maxRunning, 2)
    assert.deepEqual(rec.events.slice(0, 2), ['start:a', 'start:b'])
    assert.equal(rec.events.filter((e) => e.startsWith('start')).length, 6)
  })

  it('lets refused calls take no part: they do not split a batch of reads', async () => {
    const { gate, calls, rec } = tools()
    const results = await gate.execute([read('a'), write('bad-args-write', 'not a number'), { name: 'nope' }, read('b')])
    assert.deepEqual(results.map((r) => r.errorKind ?? 'ok'), ['ok', 'invalid_arguments', 'unknown_tool', 'ok'])
    assert.deepEqual(rec.events.slice(0, 2), ['start:a', 'start:b'])
    assert.equal(calls.write, 0)
  })

  it('records how long a call waited for the scheduler', async () => {
    const { gate } = tools()
    const [first, second] = await gate.execute([write('w1', 20), write('w2', 1)])
    assert.equal(first.metadata.queuedMs, 0)
    assert.ok(second.metadata.queuedMs > 0, String(second.metadata.queuedMs))
  })
})

describe('a large turn', () => {
  it('answers 300 mixed calls, in order, within the concurrency cap', async () => {
    let running = 0
    let max = 0
    const { gate } = gateWith([
      { name: 'read', readOnly: true, handler: async ({ i }) => {
        running += 1
        max = Math.max(max, running)
        await sleep(i % 3)
        running -= 1
        return i
      } },
      { name: 'write', handler: ({ i }) => i },
    ], { concurrency: 4 })
    const calls = Array.from({ length: 300 }, (_, i) => (i % 50 === 49 ? { id: `c${i}`, name: 'write', input: { i } } : { id: `c${i}`, name: 'read', input: { i } }))
    const results = await gate.execute(calls)
    assert.equal(results.length, 300)
    results.forEach((r, i) => {
      assert.equal(r.callId, `c${i}`)
      assertSuccess(r, String(i))
    })
    assert.equal(max, 4)
    assert.equal(gate.running, 0)
  })
})

describe('failures stay with their call', () => {
  it('a throw, a rejection and a timeout never cancel or change their siblings', async () => {
    const signals = []
    const { gate, calls } = gateWith([
      { name: 'boom', readOnly: true, handler: () => {
        throw new Error('boom')
      } },
      { name: 'reject', readOnly: true, handler: () => Promise.reject(new Error('nope')) },
      // No retry: a read-only timeout would otherwise be retried under the default policy.
      { name: 'hang', readOnly: true, timeoutMs: 80, retry: false, handler: never },
      { name: 'slow', readOnly: true, handler: async (_a, ctx) => {
        signals.push(ctx.signal)
        await sleep(150)
        return 'slow done'
      } },
      { name: 'after', handler: () => 'after done' },
    ])
    const results = await gate.execute([{ name: 'boom' }, { name: 'reject' }, { name: 'hang' }, { name: 'slow' }, { name: 'after' }])
    assertFailure(results[0], 'handler_error', 'Error: boom')
    assertFailure(results[1], 'handler_error', 'Error: nope')
    assertFailure(results[2], 'timeout')
    assertSuccess(results[3], 'slow done')
    assert.equal(signals[0].aborted, false, 'a sibling’s timeout does not abort the others')
    assertSuccess(results[4], 'after done')
    assert.deepEqual(calls, { boom: 1, reject: 1, hang: 1, slow: 1, after: 1 })
  })
})

describe('turns in parallel', () => {
  it('keeps two turns on one executor apart', async () => {
    const { gate } = tools()
    const [a, b] = await Promise.all([
      gate.execute([read('a1', 20), write('a2', 5)]),
      gate.execute([write('b1', 5), read('b2', 5)]),
    ])
    assert.deepEqual(a.map((r) => r.output), ['a1', 'a2'])
    assert.deepEqual(b.map((r) => r.output), ['b1', 'b2'])
  })
})

describe('running', () => {
  it('counts the handlers running now, across turns, and is 0 after the turns end', async () => {
    const releases = []
    const started = []
    const { gate } = gateWith([{ name: 'held', readOnly: true, handler: () => {
      const d = deferred()
      releases.push(d.resolve)
      started.push(gate.running)
      return d.promise
    } }])
    assert.equal(gate.running, 0)
    const one = gate.execute([{ name: 'held' }, { name: 'held' }])
    const two = gate.execute([{ name: 'held' }])
    assert.equal(gate.running, 3)
    // Each handler saw itself and every handler started before it counted.
    assert.deepEqual(started, [2, 2, 3])
    releases[0]('x')
    await sleep(5)
    assert.equal(gate.running, 2)
    for (const release of releases) release('x')
    await Promise.all([one, two])
    assert.equal(gate.running, 0)
  })

  it('stops counting a handler once its call timed out, even if the handler goes on', async () => {
    const { gate } = gateWith([{ name: 'hang', timeoutMs: 50, handler: never }])
    const turn = gate.execute([{ name: 'hang' }])
    assert.equal(gate.running, 1)
    const [r] = await turn
    assert.equal(r.errorKind, 'timeout')
    assert.equal(gate.running, 0)
  })
})
