'use strict'
// What the JS layer keeps of calls it no longer waits for. A handler that never settles may keep its `ctx` forever
// (waiting on a socket that never answers); through it, the executor must keep a small record, not the turn with
// its calls and their outputs. Measured in a child process with --expose-gc, with wide margins: heap use after a
// full collection is stable from run to run, unlike time.

const { describe, it } = require('node:test')
const assert = require('node:assert/strict')
const { spawn } = require('node:child_process')
const { lastJsonLine } = require('./helpers')

function runGcChild(script) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--expose-gc', '-e', script], { cwd: __dirname, stdio: ['ignore', 'pipe', 'pipe'] })
    let stdout = ''
    let stderr = ''
    child.stdout.setEncoding('utf8').on('data', (d) => { stdout += d })
    child.stderr.setEncoding('utf8').on('data', (d) => { stderr += d })
    child.on('error', reject)
    child.on('close', (code) => resolve({ code, stdout, stderr }))
  })
}

describe('handlers that never settle', () => {
  it('keep a small record each, and close() lets them go', async () => {
    const child = await runGcChild(`
      const { ToolExecutor } = require('..')
      const gate = new ToolExecutor()
      const waiting = [] // what a handler stuck on a socket keeps: its ctx
      gate.register({ name: 'hang', timeoutMs: 20, handler: (_args, ctx) => new Promise(() => { waiting.push(ctx) }) })
      gate.register({ name: 'page', readOnly: true, handler: () => 'p'.repeat(10_000) })
      const heap = () => { global.gc(); return process.memoryUsage().heapUsed }
      ;(async () => {
        const start = heap()
        const blob = 'a'.repeat(10_000)
        for (let i = 0; i < 5_000; i += 500) {
          await Promise.all(Array.from({ length: 500 }, (_, k) => gate.execute([{ name: 'page' }, { name: 'hang', input: { blob: blob + (i + k) } }])))
        }
        const open = heap() - start
        const { stillRunning } = await gate.close({ timeoutMs: 10 })
        const pending = gate.pendingHandlers().length
        const closed = heap() - start
        console.log(JSON.stringify({ open, closed, stillRunning: stillRunning.length, pending, waiting: waiting.length }))
      })()
    `)
    assert.equal(child.code, 0, child.stderr)
    const { open, closed, stillRunning, pending, waiting } = lastJsonLine(child.stdout)
    assert.equal(waiting, 5_000)
    assert.equal(stillRunning, 5_000, 'close() says which handlers never settled')
    assert.equal(pending, 0, 'and forgets them')
    const MB = 2 ** 20
    // Each turn sent 10 KB of arguments and got a 10 KB output: 100 MB were they kept.
    assert.ok(open < 32 * MB, `${(open / MB).toFixed(0)} MB held while the handlers hang`)
    assert.ok(closed < 32 * MB, `${(closed / MB).toFixed(0)} MB held after close()`)
  })

  it('keeps at most 10,000 records of handlers stopped and never settled, the oldest going first', async () => {
    const { ToolExecutor } = require('..')
    const gate = new ToolExecutor()
    gate.register({ name: 'hang', readOnly: true, timeoutMs: 10, handler: () => new Promise(() => {}) })
    for (let i = 0; i < 10_050; i += 1_005) {
      await gate.execute(Array.from({ length: 1_005 }, (_, k) => ({ id: `h${i + k}`, name: 'hang' })))
    }
    const pending = gate.pendingHandlers()
    assert.equal(pending.length, 10_000)
    assert.equal(pending[0].callId, 'h50', 'the 50 oldest went')
    assert.ok(pending.every((p) => p.state === 'abandoned' && p.reason === 'timeout'))
    await gate.close({ timeoutMs: 1 })
  })

  it("let go of what a stopped handler's signal listeners hold", async () => {
    const child = await runGcChild(`
      const { ToolExecutor } = require('..')
      const gate = new ToolExecutor()
      gate.register({ name: 'hang', readOnly: true, timeoutMs: 10, handler: (_args, ctx) => {
        const buffer = Buffer.alloc(1024 * 1024, 1) // what the handler's abort listener holds on to
        ctx.signal.addEventListener('abort', () => buffer.length)
        return new Promise(() => {})
      } })
      // Collected twice, a turn of the event loop apart, so that what is freed only in a later task is not
      // counted as held (Node 24 sometimes kept a third of it through one collection).
      const held = async () => {
        global.gc()
        await new Promise((resolve) => setImmediate(resolve))
        global.gc()
        const m = process.memoryUsage()
        return m.heapUsed + m.arrayBuffers
      }
      ;(async () => {
        const start = await held()
        await gate.execute(Array.from({ length: 200 }, (_, k) => ({ id: 'h' + k, name: 'hang' })))
        await new Promise((resolve) => setTimeout(resolve, 20))
        console.log(JSON.stringify({ abandoned: gate.pendingHandlers().length, held: (await held()) - start }))
      })()
    `)
    assert.equal(child.code, 0, child.stderr)
    const { abandoned, held } = lastJsonLine(child.stdout)
    assert.equal(abandoned, 200)
    assert.ok(held < 32 * 2 ** 20, `${(held / 2 ** 20).toFixed(0)} MB held by 200 stopped handlers (200 MB were their listeners kept)`)
  })
})
