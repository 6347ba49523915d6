'use strict'
// The addon loaded only in worker threads, one worker after another, each in a fresh process: what test runners
// do (vitest's threads pool, ava). Loading it on the main thread first would hide a crash on the second load.

const { describe, it } = require('node:test')
const assert = require('node:assert/strict')
const { runChild, lastJsonLine } = require('./helpers')

/** A child process that starts `count` workers one after another, each running `body` (with `gate`, `post` and
 * `workerData` in scope) once the addon is loaded, and prints what each worker posted and how it exited. */
function sequentialWorkers(count, body, { terminate = false } = {}) {
  return `
    const { Worker } = require('node:worker_threads')
    const code = \`
      const { parentPort, workerData } = require('node:worker_threads')
      const { ToolExecutor } = require(workerData.pkg)
      const post = (m) => parentPort.postMessage(m)
      const gate = new ToolExecutor({ maxOutputChars: 1000 })
      ${body.replace(/`/g, '\\`').replace(/\$\{/g, '\\${')}
    \`
    const one = (n) => new Promise((resolve, reject) => {
      const worker = new Worker(code, { eval: true, workerData: { pkg: require('node:path').resolve('..'), n } })
      const posted = []
      worker.on('message', (m) => {
        posted.push(m)
        if (${terminate} && m === 'pending') worker.terminate()
      })
      worker.on('error', reject)
      worker.on('exit', (code) => resolve({ n, code, posted }))
    })
    ;(async () => {
      const outcomes = []
      for (let n = 0; n < ${count}; n++) outcomes.push(await one(n))
      console.log(JSON.stringify(outcomes))
    })()
  `
}

async function runSequence(count, body, options) {
  const child = await runChild(sequentialWorkers(count, body, options), { killAfterMs: 60_000 })
  assert.equal(child.timedOut, false, 'the child did not exit by itself')
  assert.equal(child.signal, null, `the process died of ${child.signal}: ${child.stderr}`)
  assert.equal(child.code, 0, child.stderr)
  return lastJsonLine(child.stdout)
}

describe('the addon loaded only in workers, one after another', () => {
  it('runs a turn in each of 6 workers, each started after the one before ended', async () => {
    // A read batch, a timeout (the deadline watcher) and an output large enough to be shaped on another thread.
    const body = `
      gate.register({ name: 'read', readOnly: true, handler: ({ id }) => 'w' + workerData.n + ':' + id })
      gate.register({ name: 'hang', timeoutMs: 30, handler: () => new Promise(() => {}) })
      gate.register({ name: 'big', handler: () => 'x'.repeat(300 * 1024) })
      gate.execute([{ name: 'read', input: { id: 'a' } }, { name: 'read', input: { id: 'b' } }, { name: 'hang' }, { name: 'big' }])
        .then((results) => post(results.map((r) => r.errorKind ?? (r.truncated ? 'spilled' : r.output))))
    `
    const outcomes = await runSequence(6, body)
    assert.equal(outcomes.length, 6)
    for (const { n, code, posted } of outcomes) {
      assert.equal(code, 0, `worker ${n} exit code`)
      assert.deepEqual(posted, [[`w${n}:a`, `w${n}:b`, 'timeout', 'spilled']])
    }
  })

  it('loads again after a worker was terminated with a handler pending', async () => {
    const body = `
      gate.register({ name: 'hang', timeoutMs: 60_000, handler: () => new Promise(() => {}) })
      gate.register({ name: 'ok', handler: () => 'ran in ' + workerData.n })
      gate.execute([{ name: 'ok' }]).then(([r]) => {
        post(r.output)
        gate.execute([{ name: 'hang' }])
        post('pending')
      })
    `
    const outcomes = await runSequence(4, body, { terminate: true })
    for (const { n, code, posted } of outcomes) {
      assert.equal(code, 1, `worker ${n} was terminated`)
      assert.deepEqual(posted, [`ran in ${n}`, 'pending'])
    }
  })

  it('loads on the main thread after the only worker that loaded it ended', async () => {
    const script = `
      ${sequentialWorkers(2, `gate.register({ name: 'ok', handler: () => 'w' }); gate.execute([{ name: 'ok' }]).then(([r]) => post(r.output))`).replace(/console\.log\(JSON\.stringify\(outcomes\)\)/, `
        const { ToolExecutor } = require('..')
        const gate = new ToolExecutor()
        gate.register({ name: 'ok', handler: () => 'main' })
        const [r] = await gate.execute([{ name: 'ok' }])
        console.log(JSON.stringify({ workers: outcomes.map((o) => [o.code, o.posted]), main: r.output }))
      `)}
    `
    const child = await runChild(script, { killAfterMs: 60_000 })
    assert.equal(child.signal, null, `the process died of ${child.signal}`)
    assert.equal(child.code, 0, child.stderr)
    assert.deepEqual(lastJsonLine(child.stdout), { workers: [[0, ['w']], [0, ['w']]], main: 'main' })
  })
})
