'use strict'
// The process level: the addon must never keep Node alive by itself, and must work in several threads at once.

const { describe, it } = require('node:test')
const assert = require('node:assert/strict')
const { Worker } = require('node:worker_threads')
const { ToolExecutor } = require('..')
const { PACKAGE_DIR, runChild, lastJsonLine, never } = require('./helpers')

describe('a child process', () => {
  it('stays up for a turn waiting only on a deadline, then exits by itself with code 0', async () => {
    // The hung handler holds nothing in the event loop: only the engine's deadline keeps the turn (and the
    // process) going until the timeout; after it the process must exit although the handler never settles.
    const script = `
      const { ToolExecutor } = require('..')
      const gate = new ToolExecutor({ defaultTimeoutMs: 10000 })
      gate.register({ name: 'search', readOnly: true, handler: async ({ q }) => ({ hits: [q] }) })
      gate.register({ name: 'hang', timeoutMs: 100, handler: () => new Promise(() => {}) })
      gate.register({ name: 'boom', handler: () => { throw new Error('boom') } })
      gate.execute([
        { type: 'tool_use', id: 'a', name: 'search', input: { q: 'x' } },
        { type: 'tool_use', id: 'b', name: 'hang', input: {} },
        { type: 'tool_use', id: 'c', name: 'boom', input: {} },
      ]).then((results) => console.log(JSON.stringify(results.map((r) => [r.callId, r.errorKind ?? 'ok', r.output]))))
    `
    const child = await runChild(script)
    assert.equal(child.timedOut, false, 'the child did not exit by itself')
    assert.equal(child.code, 0, child.stderr)
    assert.equal(child.stderr, '')
    const results = lastJsonLine(child.stdout)
    assert.deepEqual(results.map(([id, kind]) => [id, kind]), [['a', 'ok'], ['b', 'timeout'], ['c', 'handler_error']])
    assert.equal(results[0][2], '{"hits":["x"]}')
    assert.ok(results[1][2].includes('time limit of 100 ms'), results[1][2])
  })

  it('exits by itself when tools are registered and nothing runs', async () => {
    const script = `
      const { ToolExecutor } = require('..')
      const gate = new ToolExecutor({ defaultTimeoutMs: 60000 })
      gate.register({ name: 'hang', handler: () => new Promise(() => {}) })
      gate.definitions('anthropic')
      console.log(JSON.stringify(gate.list().map((t) => t.name)))
    `
    const child = await runChild(script)
    assert.equal(child.timedOut, false, 'an idle executor kept the process alive')
    assert.equal(child.code, 0, child.stderr)
    assert.deepEqual(lastJsonLine(child.stdout), ['hang'])
  })

  it('exits by itself after a turn that was cancelled while a handler hung', async () => {
    const script = `
      const { ToolExecutor } = require('..')
      const gate = new ToolExecutor({ defaultTimeoutMs: 60000 })
      gate.register({ name: 'hang', readOnly: true, handler: () => new Promise(() => {}) })
      const controller = new AbortController()
      const turn = gate.execute([{ name: 'hang' }, { name: 'hang' }], { signal: controller.signal })
      setTimeout(() => controller.abort(), 20)
      turn.then((results) => console.log(JSON.stringify(results.map((r) => r.errorKind))))
    `
    const child = await runChild(script)
    assert.equal(child.timedOut, false, 'a disarmed 60 s deadline kept the process alive')
    assert.equal(child.code, 0, child.stderr)
    assert.deepEqual(lastJsonLine(child.stdout), ['cancelled', 'cancelled'])
  })

  it('lets an executor go once its turns are done, though its timer for their deadlines is still set', async () => {
    // The turn's 60 s deadline set the executor's own wake-up timer; it must hold neither the process nor the
    // executor.
    const script = `
      require('v8').setFlagsFromString('--expose-gc')
      const gc = require('vm').runInNewContext('gc')
      const { ToolExecutor } = require('..')
      let collected = false
      const registry = new FinalizationRegistry(() => { collected = true })
      async function oneTurn() {
        const gate = new ToolExecutor({ defaultTimeoutMs: 60000 })
        gate.register({ name: 'read', readOnly: true, handler: async () => 'ok' })
        registry.register(gate, 'gate')
        return (await gate.execute([{ name: 'read' }]))[0].output
      }
      oneTurn().then(async (output) => {
        for (let i = 0; i < 50 && !collected; i++) {
          gc()
          await new Promise((resolve) => setImmediate(resolve))
        }
        console.log(JSON.stringify({ output, collected }))
      })
    `
    const child = await runChild(script)
    assert.equal(child.timedOut, false, 'the timer for a 60 s deadline kept the process alive')
    assert.equal(child.code, 0, child.stderr)
    assert.deepEqual(lastJsonLine(child.stdout), { output: 'ok', collected: true })
  })
})

describe('worker threads', () => {
  /** Runs in each worker: a read-only batch and a timeout; posts the results, the events and its running count. */
  const WORKER = `
    const { parentPort, workerData } = require('node:worker_threads')
    const { ToolExecutor } = require(workerData.pkg)
    const gate = new ToolExecutor({ defaultTimeoutMs: 10000 })
    const events = []
    gate.register({ name: 'read', readOnly: true, handler: async ({ id }) => {
      events.push('start:' + id)
      await new Promise((resolve) => setTimeout(resolve, 20))
      events.push('end:' + id)
      return 'w' + workerData.n + ':' + id
    } })
    gate.register({ name: 'hang', timeoutMs: workerData.timeoutMs, handler: () => new Promise(() => {}) })
    gate.execute([
      { name: 'read', input: { id: 'a' } },
      { name: 'read', input: { id: 'b' } },
      { name: 'hang' },
    ]).then((results) => parentPort.postMessage({
      n: workerData.n,
      results: results.map((r) => [r.errorKind ?? 'ok', r.output]),
      events,
      running: gate.running,
    }))
  `

  function runWorker(n, timeoutMs) {
    return new Promise((resolve, reject) => {
      const worker = new Worker(WORKER, { eval: true, workerData: { pkg: PACKAGE_DIR, n, timeoutMs } })
      let message
      // A worker that cannot exit by itself fails the test instead of hanging it.
      const guard = setTimeout(() => {
        worker.terminate()
        reject(new Error(`worker ${n} did not exit by itself`))
      }, 20_000)
      worker.on('message', (m) => { message = m })
      worker.on('error', (err) => {
        clearTimeout(guard)
        reject(err)
      })
      worker.on('exit', (code) => {
        clearTimeout(guard)
        resolve({ code, message })
      })
    })
  }

  it('runs the addon in 3 workers at once; each gets its results and exits', async () => {
    // Different time limits, so that workers finish (and tear down their addon instance) while others still wait.
    const outcomes = await Promise.all([runWorker(0, 60), runWorker(1, 150), runWorker(2, 250)])
    for (const [n, { code, message }] of outcomes.entries()) {
      assert.equal(code, 0, `worker ${n} exit code`)
      assert.ok(message, `worker ${n} posted no results`)
      assert.equal(message.n, n)
      assert.deepEqual(message.results.slice(0, 2), [['ok', `w${n}:a`], ['ok', `w${n}:b`]])
      assert.equal(message.results[2][0], 'timeout')
      assert.ok(message.results[2][1].includes(`time limit of ${[60, 150, 250][n]} ms`))
      assert.deepEqual(message.events.slice(0, 2), ['start:a', 'start:b'], 'the read-only batch overlapped')
      assert.equal(message.running, 0)
    }
  })

  it('keeps deadlines working on the main thread while workers come and go', async () => {
    // The main thread's turn spans the workers' whole lives: their teardown must not stop its deadline watcher.
    const gate = new ToolExecutor()
    gate.register({ name: 'hang', timeoutMs: 800, handler: never })
    const mainTurn = gate.execute([{ name: 'hang' }])
    const outcomes = await Promise.all([runWorker(0, 50), runWorker(1, 100), runWorker(2, 150)])
    assert.deepEqual(outcomes.map((o) => o.code), [0, 0, 0])
    const [r] = await mainTurn
    assert.equal(r.errorKind, 'timeout')
    assert.ok(r.error.includes('time limit of 800 ms'))
  })

  it('survives a worker terminated while its turn waits on a deadline', async () => {
    const worker = new Worker(`
      const { parentPort, workerData } = require('node:worker_threads')
      const { ToolExecutor } = require(workerData.pkg)
      const gate = new ToolExecutor()
      gate.register({ name: 'hang', timeoutMs: 200, handler: () => new Promise(() => {}) })
      gate.execute([{ name: 'hang' }])
      parentPort.postMessage('waiting')
    `, { eval: true, workerData: { pkg: PACKAGE_DIR } })
    await new Promise((resolve, reject) => {
      worker.once('message', resolve)
      worker.once('error', reject)
    })
    assert.equal(await worker.terminate(), 1)
    // The dead worker's deadline passes during this turn; the main thread's addon instance keeps working.
    const gate = new ToolExecutor()
    gate.register({ name: 'hang', timeoutMs: 300, handler: never })
    const [r] = await gate.execute([{ name: 'hang' }])
    assert.equal(r.errorKind, 'timeout')
  })
})
