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

/** A child that makes `method` of the real engine throw (from its `nth` call on), then runs `body`. */
function withFault(method, nth, body) {
  return runChild(`
    const bindingPath = require.resolve('../binding.js')
    const binding = require(bindingPath)
    let calls = 0
    class Faulty extends binding.Engine {
      ${method}(...args) {
        if (++calls >= ${nth}) throw new Error('injected fault in ${method}')
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
  `)
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
})
