'use strict'
// No input may abort the process. A model's artifact search pattern too large to compile is searched for as text;
// and should the engine fail anyway (a bug), its turns end with an error result per call instead of hanging or
// taking the process down. The engine contains a bug on one call to that call (crates/core: panic.rs); here a fault
// is injected into the real engine from outside, by wrapping the binding's class before the package loads it.

const { describe, it } = require('node:test')
const assert = require('node:assert/strict')
const { runChild, lastJsonLine } = require('./helpers')

describe('an artifact search pattern too large to compile', () => {
  it('is searched for as literal text, in a process that stays up', async () => {
    const child = await runChild(`
      const { ToolExecutor } = require('..')
      const gate = new ToolExecutor({ maxOutputChars: 100 })
      gate.registerArtifactTools()
      gate.register({ name: 'big', handler: () => 'x'.repeat(1000) + '(aaa' })
      ;(async () => {
        const [spilled] = await gate.execute([{ name: 'big' }])
        const path = spilled.metadata.artifactPath
        const [huge] = await gate.execute([{ name: 'search_artifact', input: { path, pattern: '(' + 'a'.repeat(400000) } }])
        const [small] = await gate.execute([{ name: 'search_artifact', input: { path, pattern: '(aaa' } }])
        console.log(JSON.stringify([huge.errorKind ?? 'ok', huge.output.split('\\n')[0].length, huge.output.includes('0 matches'), small.output.includes('1 match for "(aaa" as literal text')]))
        await gate.close()
      })()
    `)
    assert.equal(child.signal, null, `the process died of ${child.signal}: ${child.stderr.slice(-500)}`)
    assert.equal(child.code, 0, child.stderr)
    const [kind, headerLength, none, literal] = lastJsonLine(child.stdout)
    assert.equal(kind, 'ok')
    assert.ok(headerLength < 400, `the pattern is quoted cut short (${headerLength} characters)`)
    assert.equal(none, true)
    assert.equal(literal, true)
  })
})

/** A child that makes `method` of the real engine throw (from its `nth` call on, or only on the `nth` with
 * `once`), then runs `body`. */
function withFault(method, nth, body, { once = false, killAfterMs } = {}) {
  return runChild(`
    const bindingPath = require.resolve('../binding.js')
    const binding = require(bindingPath)
    let calls = 0
    class Faulty extends binding.Engine {
      ${method}(...args) {
        calls += 1
        if (${once} ? calls === ${nth} : calls >= ${nth}) throw new Error('injected fault in ${method}')
        return super.${method}(...args)
      }
    }
    require.cache[bindingPath].exports = { ...binding, Engine: Faulty }
    const { ToolExecutor } = require('..')
    const warnings = []
    process.on('warning', (w) => warnings.push(w.message))
    ;(async () => {
      ${body}
    })()
  `, { killAfterMs })
}

function assertEveryCallFailed(results, ids) {
  assert.deepEqual(results.map((r) => r.callId), ids)
  for (const r of results) {
    assert.equal(r.success, false)
    assert.equal(r.errorKind, 'handler_error')
    assert.ok(r.error.includes('toolgate failed while running this turn') && r.error.includes('injected fault'), r.error)
    assert.equal(r.output, `Error (handler_error): ${r.error}`)
  }
}

describe('an engine that fails anyway', () => {
  it('tells a watcher of live turns each failed call\'s result and that the turn is done', async () => {
    const child = await withFault('complete', 1, `
      const gate = new ToolExecutor()
      gate.register({ name: 'q', readOnly: true, handler: () => 'ran' })
      const events = []
      gate.watch((batch) => events.push(...batch))
      const results = await gate.execute([{ id: 'a', name: 'q' }, { id: 'b', name: 'q' }])
      await new Promise((resolve) => setImmediate(resolve))
      console.log(JSON.stringify([results.map((r) => r.errorKind), events.filter((e) => e.type === 'result').map((e) => [e.index, e.result.errorKind]), events.filter((e) => e.type === 'done').length]))
    `)
    assert.equal(child.code, 0, child.stderr)
    const [kinds, heard, done] = lastJsonLine(child.stdout)
    assert.deepEqual(kinds, ['handler_error', 'handler_error'])
    assert.deepEqual(heard, [[0, 'handler_error'], [1, 'handler_error']])
    assert.equal(done, 1)
  })

  it('answers every call of a turn the engine cannot begin', async () => {
    const child = await withFault('begin', 1, `
      const gate = new ToolExecutor()
      gate.register({ name: 'ok', handler: () => 'ran' })
      const results = await gate.execute([{ type: 'tool_use', id: 'a', name: 'ok', input: {} }, { name: 'ok', call_id: 'b' }])
      console.log(JSON.stringify(results))
    `)
    assert.equal(child.code, 0, child.stderr)
    assertEveryCallFailed(lastJsonLine(child.stdout), ['a', 'b'])
  })

  it('ends every open turn when a settlement cannot cross, aborts its handlers, and keeps the process up', async () => {
    const child = await withFault('complete', 1, `
      const gate = new ToolExecutor()
      let aborted = 0
      gate.register({ name: 'quick', readOnly: true, handler: () => 'ran' })
      gate.register({ name: 'slow', readOnly: true, handler: (_args, { signal }) => new Promise((resolve) => {
        signal.addEventListener('abort', () => { aborted += 1; resolve('late') })
      }) })
      const [first, second] = await Promise.all([
        gate.execute([{ id: 'q', name: 'quick' }, { id: 's', name: 'slow' }]),
        gate.execute([{ id: 't', name: 'slow' }]),
      ])
      await new Promise((resolve) => setImmediate(resolve)) // warnings are emitted on the next tick
      console.log(JSON.stringify({ first, second, aborted, warned: warnings.some((w) => w.includes('the engine failed')) }))
    `)
    assert.equal(child.timedOut, false, 'a turn hung')
    assert.equal(child.code, 0, child.stderr)
    const { first, second, aborted, warned } = lastJsonLine(child.stdout)
    assertEveryCallFailed(first, ['q', 's'])
    assertEveryCallFailed(second, ['t'])
    assert.equal(aborted, 2, 'the handlers still running were aborted')
    assert.equal(warned, true)
  })

  it('keeps the results a streaming turn already handed on when the engine fails, and fails only the calls it still held', async () => {
    const child = await withFault('add', 2, `
      const gate = new ToolExecutor()
      gate.register({ name: 'charge', handler: () => 'charged' })
      gate.register({ name: 'slow', readOnly: true, handler: (_args, { signal }) => new Promise((resolve) => signal.addEventListener('abort', () => resolve('late'))) })
      const turn = gate.turn()
      const first = await turn.add({ id: 'pay', name: 'charge' })
      const seen = []
      const reading = (async () => { for await (const r of turn) seen.push(r.callId) })()
      turn.add({ id: 'after', name: 'slow' })
      const results = await turn.results
      await reading
      console.log(JSON.stringify({ first, results, seen }))
    `, { once: true })
    assert.equal(child.timedOut, false, 'the turn hung')
    assert.equal(child.code, 0, child.stderr)
    const { first, results, seen } = lastJsonLine(child.stdout)
    assert.equal(first.output, 'charged')
    assert.deepEqual(results[0], first, 'a write reported done is not reported failed afterwards')
    assertEveryCallFailed(results.slice(1), ['after'])
    assert.deepEqual(seen, ['pay', 'after'], 'each result handed on once')
  })

  it('ends the turn a deadline wakes when the engine fails then', async () => {
    const child = await withFault('expire', 1, `
      const gate = new ToolExecutor()
      gate.register({ name: 'hang', timeoutMs: 30, handler: () => new Promise(() => {}) })
      console.log(JSON.stringify(await gate.execute([{ id: 'h', name: 'hang' }])))
    `)
    assert.equal(child.timedOut, false, 'the turn hung')
    assert.equal(child.code, 0, child.stderr)
    assertEveryCallFailed(lastJsonLine(child.stdout), ['h'])
  })

  it('answers later turns after a failure that ended turns the engine had results for', async () => {
    // The turns the engine ends when told of the failure carry stage sequences new to the JS side's table.
    const child = await withFault('answer', 1, `
      const gate = new ToolExecutor({ approve: () => true })
      gate.register({ name: 'ok', readOnly: true, handler: () => 'ran' })
      gate.register({ name: 'hang', readOnly: true, handler: () => new Promise(() => {}) })
      gate.register({ name: 'asks', needsApproval: true, handler: () => 'ran' })
      await Promise.all([gate.execute([{ id: 's', name: 'ok' }, { id: 'h', name: 'hang' }]), gate.execute([{ id: 'a', name: 'asks' }])])
      const later = await Promise.race([gate.execute([{ id: 'later', name: 'ok' }]), new Promise((resolve) => setTimeout(resolve, 3000, 'pending'))])
      console.log(JSON.stringify(later === 'pending' ? later : later.map((r) => [r.callId, r.output])))
      process.exit(0)
    `, { once: true })
    assert.equal(child.code, 0, child.stderr)
    assert.deepEqual(lastJsonLine(child.stdout), [['later', 'ran']])
  })

  it('lets the process exit after a failure while a large value was still crossing', async () => {
    const child = await withFault('answer', 1, `
      const gate = new ToolExecutor({ approve: () => new Promise((resolve) => setTimeout(resolve, 5, true)) })
      gate.register({ name: 'big', readOnly: true, handler: () => 'x'.repeat(20_000_000) })
      gate.register({ name: 'asks', needsApproval: true, handler: () => 'ran' })
      const [[big], [asks]] = await Promise.all([gate.execute([{ id: 'b', name: 'big' }]), gate.execute([{ id: 'a', name: 'asks' }])])
      console.log(JSON.stringify([big.errorKind, asks.errorKind]))
    `, { once: true, killAfterMs: 10_000 })
    assert.equal(child.timedOut, false, 'the process did not exit by itself')
    assert.equal(child.code, 0, child.stderr)
    assert.deepEqual(lastJsonLine(child.stdout), ['handler_error', 'handler_error'])
  })

  it('does not list a handler that had settled as still running after a failure', async () => {
    const child = await withFault('answer', 1, `
      const lingering = []
      for (let hops = 0; hops < 8; hops++) {
        let release
        const gate = new ToolExecutor({ approve: () => new Promise((resolve) => { release = resolve }) })
        gate.register({ name: 'quick', readOnly: true, handler: () => new Promise((resolve) => setTimeout(async () => {
          release(true)
          for (let i = 0; i < hops; i++) await null
          resolve('done')
        }, 10)) })
        gate.register({ name: 'asks', needsApproval: true, handler: () => 'ran' })
        calls = 0
        await Promise.all([gate.execute([{ id: 'q', name: 'quick' }]), gate.execute([{ id: 'a', name: 'asks' }])])
        await new Promise((resolve) => setTimeout(resolve, 30))
        lingering.push(gate.pendingHandlers().length)
        await gate.close({ timeoutMs: 100 })
      }
      console.log(JSON.stringify(lingering))
    `, { once: true })
    assert.equal(child.code, 0, child.stderr)
    assert.deepEqual(lastJsonLine(child.stdout), [0, 0, 0, 0, 0, 0, 0, 0])
  })
})
