'use strict'
// Invoke and normalize: whatever a handler returns, throws or fails to do becomes one result.

const { describe, it } = require('node:test')
const assert = require('node:assert/strict')
const { ToolExecutor } = require('..')
const { gateWith, assertFailure, assertSuccess, marks, stations, never, sleep, deferred, runChild, lastJsonLine, ADMITTED } = require('./helpers')

/** Runs one handler once and returns its result. */
async function runOne(handler, spec = {}, options = {}) {
  const { gate } = gateWith([{ name: 'tool', ...spec, handler }], options)
  const [result] = await gate.execute([{ id: 'c1', name: 'tool' }])
  assert.equal(result.callId, 'c1')
  assert.equal(result.name, 'tool')
  return result
}

/** The stations of a call that ran to the end. */
const FULL = ['lookup', 'parse', 'validate', 'permission', 'invoke', 'normalize', 'shape']

describe('handler return values', () => {
  it('passes a string returned synchronously', async () => {
    const r = await runOne(() => 'plain text')
    assertSuccess(r, 'plain text')
    assert.deepEqual(marks(r), [...ADMITTED, 'invoke:returned', 'normalize:text', 'shape:ok'])
    assert.equal(r.retryable, false)
    assert.equal(r.attempts, 1)
    assert.equal(r.cached, false)
    assert.equal(r.truncated, false)
    assert.equal(typeof r.latencyMs, 'number')
    assert.ok(r.latencyMs >= 0)
    assert.equal(r.metadata.queuedMs, 0, 'the first call starts as the turn begins')
    assert.equal(r.metadata.structured, undefined)
  })

  it('passes a string resolved asynchronously', async () => {
    const r = await runOne(async () => {
      await sleep(5)
      return 'later'
    })
    assertSuccess(r, 'later')
    assert.equal(r.attempts, 1)
  })

  it('records when the turn began (ms since the epoch)', async () => {
    const before = Date.now()
    const r = await runOne(() => 'x')
    const after = Date.now()
    assert.ok(r.metadata.startedAt >= before - 1 && r.metadata.startedAt <= after + 1, String(r.metadata.startedAt))
  })

  it("says '(no output)' for undefined and null", async () => {
    for (const value of [undefined, null]) {
      const r = await runOne(() => value)
      assertSuccess(r, '(no output)')
      assert.equal(r.metadata.structured, undefined)
    }
    assertSuccess(await runOne(async () => {}), '(no output)')
  })

  it('gives numbers and booleans as JSON text', async () => {
    const num = await runOne(() => 42.5)
    assertSuccess(num, '42.5')
    assert.equal(num.metadata.structured, 42.5)
    const zero = await runOne(() => 0)
    assertSuccess(zero, '0')
    const bool = await runOne(() => false)
    assertSuccess(bool, 'false')
    assert.equal(bool.metadata.structured, false)
  })

  it('gives objects and arrays as JSON text and keeps the structure in metadata', async () => {
    const obj = await runOne(() => ({ b: 1, a: [true, null, 'x'], nested: { k: 'v' } }))
    assertSuccess(obj, '{"b":1,"a":[true,null,"x"],"nested":{"k":"v"}}')
    assert.deepEqual(obj.metadata.structured, { b: 1, a: [true, null, 'x'], nested: { k: 'v' } })
    assert.deepEqual(marks(obj).slice(-3), ['invoke:returned', 'normalize:structured', 'shape:ok'])
    const arr = await runOne(async () => [1, 'two'])
    assertSuccess(arr, '[1,"two"]')
    assert.deepEqual(arr.metadata.structured, [1, 'two'])
  })

  it('gives {stdout, stderr} as stdout plus a stderr summary, stderr whole in metadata, and success', async () => {
    const r = await runOne(() => ({ stdout: 'hello', stderr: 'warn: deprecated' }))
    assertSuccess(r, 'hello\n[stderr] warn: deprecated')
    assert.equal(r.metadata.stderr, 'warn: deprecated')
    assert.deepEqual(r.metadata.structured, { stdout: 'hello', stderr: 'warn: deprecated' })

    // Process output usually ends in a newline: it is trimmed before the summary is appended.
    const lines = await runOne(() => ({ stdout: 'line 1\nline 2\n', stderr: 'warn\n', exitCode: 0 }))
    assertSuccess(lines, 'line 1\nline 2\n[stderr] warn')
    assert.equal(lines.metadata.stderr, 'warn\n')
    assert.equal(lines.metadata.exitCode, 0)

    const quiet = await runOne(() => ({ stdout: 'only out', stderr: '' }))
    assertSuccess(quiet, 'only out')
    assert.equal(quiet.metadata.stderr, undefined)

    const failed = await runOne(() => ({ stdout: '', stderr: 'boom', exitCode: 2 }))
    assertSuccess(failed, '(no output)\n[exit code 2]\n[stderr] boom')
    assert.equal(failed.metadata.exitCode, 2)

    const long = 'e'.repeat(2000)
    const big = await runOne(() => ({ stdout: 'ok', stderr: long }))
    assert.ok(big.output.startsWith('ok\n[stderr] ' + 'e'.repeat(500) + '…'), big.output.slice(0, 40))
    assert.ok(big.output.endsWith('(1 lines, 2000 characters in all)'), big.output.slice(-60))
    assert.equal(big.metadata.stderr, long)
  })

  it('gives a BigInt as its decimal text, top level and nested', async () => {
    const top = await runOne(() => 10n ** 20n)
    assertSuccess(top, '100000000000000000000')
    const nested = await runOne(() => ({ id: 2n ** 64n, list: [1n] }))
    assertSuccess(nested, '{"id":"18446744073709551616","list":["1"]}')
    assert.deepEqual(nested.metadata.structured, { id: '18446744073709551616', list: ['1'] })
  })

  it('gives NaN and Infinity as text', async () => {
    assertSuccess(await runOne(() => NaN), 'NaN')
    assertSuccess(await runOne(() => Infinity), 'Infinity')
    assertSuccess(await runOne(() => -Infinity), '-Infinity')
    // Inside a structure they follow JSON (null).
    assertSuccess(await runOne(() => ({ x: NaN })), '{"x":null}')
  })

  it('describes binary data instead of dumping it', async () => {
    for (const [value, what] of [[Buffer.from('abc'), '3 bytes, text/plain'], [new Uint8Array(10), '10 bytes, application/octet-stream'], [new ArrayBuffer(4), '4 bytes, application/octet-stream']]) {
      const r = await runOne(() => value)
      assertSuccess(r, `(binary data: ${what}; not shown as text, saved to ${r.metadata.artifactPath})`)
    }
  })

  it('fails a circular object as handler_error without crashing', async () => {
    const r = await runOne(() => {
      const o = { name: 'loop' }
      o.self = o
      return o
    })
    assertFailure(r, 'handler_error', 'Tool "tool" returned a value that cannot be passed on as text or JSON: ', 'circular')
    assert.equal(r.retryable, false)
    assert.deepEqual(stations(r), FULL)
  })

  it('fails a function or a Symbol as handler_error', async () => {
    assertFailure(await runOne(() => () => 1), 'handler_error', 'Tool "tool" returned a value that cannot be passed on as text or JSON: a function.')
    assertFailure(await runOne(() => Symbol('token')), 'handler_error', 'cannot be passed on as text or JSON: a symbol (token).')
  })

  it('fails a value whose toJSON throws as handler_error', async () => {
    const r = await runOne(() => ({ toJSON() { throw new RangeError('no json for you') } }))
    assertFailure(r, 'handler_error', 'cannot be passed on as text or JSON: no json for you')
  })

  it('truncates an output over maxOutputChars, keeping the head and saying how much there was', async () => {
    const text = 'abcdefghij'.repeat(100)
    const r = await runOne(() => text, { maxOutputChars: 100 })
    assertSuccess(r)
    assert.equal(r.truncated, true)
    assert.equal(r.metadata.originalChars, 1000)
    assert.equal(r.output, `[Output too long for the context: 1000 characters. The whole output is saved in ${r.metadata.artifactPath}; ` +
      `read parts of that file with a file tool, or ask for a narrower result. The first 100 characters follow.]\n${text.slice(0, 100)}\n… [900 more characters in the file]`)
    assert.equal(marks(r).at(-1), 'shape:spilled')
    // The executor's limit applies to a tool without its own.
    const d = await runOne(() => 'x'.repeat(60), {}, { maxOutputChars: 50 })
    assert.equal(d.truncated, true)
    assert.ok(d.output.includes('context: 60 characters'))
    // At the limit, nothing is cut.
    const exact = await runOne(() => 'x'.repeat(50), {}, { maxOutputChars: 50 })
    assertSuccess(exact, 'x'.repeat(50))
    assert.equal(exact.truncated, false)
    assert.equal(exact.metadata.originalChars, undefined)
  })

  it('counts characters as code points and never splits one', async () => {
    const r = await runOne(() => '😀'.repeat(10), { maxOutputChars: 5 })
    assert.equal(r.truncated, true)
    assert.equal(r.metadata.originalChars, 10, 'ten emoji, although their JS length is 20')
    assert.equal(r.output.split('\n')[1], '😀'.repeat(5), r.output)
    const e = await runOne(() => {
      throw new Error('é'.repeat(300))
    }, {}, { maxErrorChars: 40 })
    assert.equal(e.truncated, true)
    // 40 characters in all, the 30 of the note of what was left out among them.
    assert.ok(e.error.endsWith(' …\n' + 'é'.repeat(5)), e.error.slice(-30))
    assert.equal([...e.error].length, 40)
    assert.ok(!e.error.includes('\uFFFD'), 'no character cut in half')
  })

  it('cuts a structured output into JSON that still parses, and saves the whole structure', async () => {
    const list = Array.from({ length: 50 }, (_, i) => `item-${i}`)
    const r = await runOne(() => list, { maxOutputChars: 100 })
    assert.equal(r.truncated, true)
    const cut = JSON.parse(r.output.slice(r.output.indexOf('\n') + 1))
    assert.deepEqual(cut, r.metadata.structured)
    assert.equal(cut.at(-1), `… ${50 - cut.length + 1} more items`)
    assert.deepEqual(cut.slice(0, -1), list.slice(0, cut.length - 1))
    assert.deepEqual(JSON.parse(require('node:fs').readFileSync(r.metadata.artifactPath, 'utf8')), list)
  })
})

describe('handler failures', () => {
  it('keeps a thrown Error’s name and message; its stack goes to metadata only', async () => {
    const r = await runOne(function explode() {
      throw new TypeError('bad thing')
    })
    assertFailure(r, 'handler_error')
    assert.equal(r.error, 'Tool "tool" failed: TypeError: bad thing')
    assert.equal(r.metadata.errorName, 'TypeError')
    assert.match(r.metadata.stack, /^TypeError: bad thing\n\s+at explode /)
    assert.ok(!r.output.includes('explode') && !r.output.includes('\n'), r.output)
    assert.equal(r.retryable, false)
    assert.equal(r.attempts, 1)
    assert.deepEqual(stations(r), FULL)
    assert.equal(marks(r).at(-1), 'shape:ok')
  })

  it('reads the same from a rejection, with the error code and the retryable flag', async () => {
    const r = await runOne(async () => {
      const err = new Error('connection reset')
      err.code = 'ECONNRESET'
      err.retryable = true
      throw err
    })
    assertFailure(r, 'handler_error')
    assert.equal(r.error, 'Tool "tool" failed: Error: connection reset')
    assert.equal(r.metadata.errorCode, 'ECONNRESET')
    assert.equal(r.retryable, true)
    const numeric = await runOne(() => Promise.reject(Object.assign(new Error('http'), { code: 503 })))
    assert.equal(numeric.metadata.errorCode, 503)
    assert.equal(numeric.retryable, false, 'only retryable: true makes it retryable')
  })

  it('says when an Error has no message', async () => {
    const r = await runOne(() => {
      throw new RangeError()
    })
    assertFailure(r, 'handler_error')
    assert.equal(r.error, 'Tool "tool" failed: RangeError (no message)')
  })

  it('describes rejections with non-Error values', async () => {
    const cases = [
      ['just a string', 'it threw a non-Error value: "just a string"'],
      [42, 'it threw a non-Error value: 42'],
      [undefined, 'it threw a non-Error value: undefined (it rejected without a reason)'],
      [null, 'it threw a non-Error value: null'],
      [{ reason: 'nope', n: 1 }, 'it threw a non-Error value: {"reason":"nope","n":1}'],
      [false, 'it threw a non-Error value: false'],
    ]
    for (const [value, text] of cases) {
      const r = await runOne(() => Promise.reject(value))
      assertFailure(r, 'handler_error')
      assert.equal(r.error, `Tool "tool" failed: ${text}`)
      assert.equal(r.metadata.stack, undefined)
    }
    // An object with a string message reads like an Error.
    const like = await runOne(() => Promise.reject({ message: 'looks like an error', code: 'E_LIKE' }))
    assert.equal(like.error, 'Tool "tool" failed: Error: looks like an error')
    assert.equal(like.metadata.errorCode, 'E_LIKE')
  })

  it('cuts a huge error message, keeping head and tail', async () => {
    const message = 'HEAD' + 'x'.repeat(5000) + 'TAIL'
    const r = await runOne(() => {
      throw new Error(message)
    }, {}, { maxErrorChars: 200 })
    assert.equal(r.errorKind, 'handler_error')
    assert.equal(r.truncated, true)
    const full = `Tool "tool" failed: Error: ${message}`
    assert.equal(r.metadata.originalChars, full.length)
    // 200 characters exactly, the note of what was left out among them (31 characters here).
    assert.equal(r.error, `${full.slice(0, 84)}\n… [${full.length - 169} characters omitted] …\n${full.slice(-85)}`)
    assert.equal(r.error.length, 200)
    assert.ok(r.error.includes('HEAD') && r.error.endsWith('TAIL'))
    assert.equal(r.output, `Error (handler_error): ${r.error}`)
    assert.equal(marks(r).at(-1), 'shape:truncated')
  })

  it('fails a thenable whose then throws as handler_error', async () => {
    const r = await runOne(() => ({ then() { throw new RangeError('then broke') } }))
    assertFailure(r, 'handler_error')
    assert.equal(r.error, 'Tool "tool" failed: RangeError: then broke')
  })

  it('fails a call whose tool was unregistered before it started, without throwing', async () => {
    const gate = new ToolExecutor()
    gate.register({ name: 'first', handler: async () => {
      gate.unregister('second')
      return 'done'
    } })
    gate.register({ name: 'second', handler: () => 'should not run' })
    const [first, second] = await gate.execute([{ name: 'first' }, { name: 'second' }])
    assertSuccess(first, 'done')
    assertFailure(second, 'handler_error', 'tool "second" was unregistered before this call started')
  })

  it('keeps the stack out of the output when an Error’s message is not a string', async () => {
    const r = await runOne(function explode() {
      const err = new Error('x')
      err.message = 42
      throw err
    })
    assertFailure(r, 'handler_error')
    assert.equal(r.error, 'Tool "tool" failed: Error: 42')
    assert.match(r.metadata.stack, /at explode /)
  })

  it('fails a value that throws while being read as handler_error', async () => {
    // A proxy whose prototype cannot be read: describing the value itself throws.
    const r = await runOne(() => new Proxy({}, { getPrototypeOf() { throw new Error('trap sprung') } }))
    assertFailure(r, 'handler_error', 'Tool "tool" returned a value that cannot be passed on as text or JSON', 'trap sprung')
  })
})

describe('arguments that cannot be serialized', () => {
  it('fails only the call whose input holds a BigInt (or a cycle); its siblings run', async () => {
    const { gate, calls } = gateWith([{ name: 'take', readOnly: true, handler: (args) => args }])
    const cyclic = {}
    cyclic.self = cyclic
    const results = await gate.execute([
      { type: 'tool_use', id: 'big', name: 'take', input: { n: 1n } },
      { type: 'tool_use', id: 'fine', name: 'take', input: { n: 1 } },
      { type: 'tool-call', toolCallId: 'loop', toolName: 'take', input: cyclic },
    ])
    assertFailure(results[0], 'invalid_arguments', 'The tool call could not be read: its arguments cannot be serialized as JSON', 'BigInt')
    assert.equal(results[0].callId, 'big')
    assert.equal(results[0].name, 'take')
    assertSuccess(results[1], '{"n":1}')
    assertFailure(results[2], 'invalid_arguments', 'cannot be serialized as JSON', 'circular')
    assert.equal(results[2].callId, 'loop')
    assert.equal(calls.take, 1)
  })

  it('keeps the id and name of a Gemini, Bedrock or MCP call whose arguments hold a BigInt, so its answer pairs', async () => {
    const { gate } = gateWith([{ name: 'take', readOnly: true, handler: (args) => args }])
    const results = await gate.execute([
      { functionCall: { id: 'g1', name: 'take', args: { n: 1n } } },
      { toolUse: { toolUseId: 'tooluse_1', name: 'take', input: { n: 1n } } },
      { name: 'take', arguments: { n: 1n }, _meta: { progressToken: 7 } },
      { toolUse: { toolUseId: 'tooluse_2', name: 'take', input: { n: 2 } } },
    ])
    assert.deepEqual(results.map((r) => [r.callId, r.name]), [['g1', 'take'], ['tooluse_1', 'take'], ['7', 'take'], ['tooluse_2', 'take']])
    for (const r of results.slice(0, 3)) assertFailure(r, 'invalid_arguments', 'cannot be serialized as JSON', 'BigInt')
    assertSuccess(results[3], '{"n":2}')
  })
})

describe('the handler context', () => {
  it('gives the call id, the tool name, the same context object and a live signal', async () => {
    const context = { userId: 'u1', allowedTools: ['inspect'] }
    let seen
    const { gate } = gateWith([{ name: 'inspect', handler: (args, ctx) => {
      seen = { args, ctx, aborted: ctx.signal.aborted }
      return 'ok'
    } }])
    await gate.execute([{ type: 'tool_use', id: 'toolu_9', name: 'inspect', input: { a: 1 } }], { context })
    assert.deepEqual(seen.args, { a: 1 })
    assert.equal(seen.ctx.callId, 'toolu_9')
    assert.equal(seen.ctx.toolName, 'inspect')
    assert.equal(seen.ctx.context, context, 'the very object passed to execute')
    assert.ok(seen.ctx.signal instanceof AbortSignal)
    assert.equal(seen.aborted, false)
  })

  it('gives one signal per call, aborted when read after the call timed out', async () => {
    // The signal may be made lazily: one first read after the deadline must still be aborted, with the reason.
    let ctx
    const { gate } = gateWith([{ name: 'late_reader', timeoutMs: 50, handler: (_a, c) => {
      ctx = c
      return never()
    } }])
    const [r] = await gate.execute([{ name: 'late_reader' }])
    assert.equal(r.errorKind, 'timeout')
    assert.equal(ctx.signal, ctx.signal, 'the same signal on every read')
    assert.equal(ctx.signal.aborted, true)
    assert.equal(ctx.signal.reason.name, 'TimeoutError')
  })

  it('keeps the signal when the context is copied with spread', async () => {
    // Handlers pass `{ ...ctx, more }` on to helpers; ToolContext types signal as a property.
    let copy
    let keys
    await runOne((_a, ctx) => {
      keys = Object.keys(ctx)
      copy = { ...ctx, extra: true }
    })
    assert.ok(keys.includes('signal'), keys.join(','))
    assert.ok(copy.signal instanceof AbortSignal)
    assert.equal(copy.callId, 'c1')
  })

  it('gives ctx.context undefined when execute had none', async () => {
    let seen = null
    await runOne((_a, ctx) => {
      seen = ctx.context
    })
    assert.equal(seen, undefined)
  })
})

describe('timeouts', () => {
  it('answers a handler that never settles with timeout, aborting its signal with a TimeoutError', async () => {
    let signal
    const { gate } = gateWith([{ name: 'hang', timeoutMs: 80, handler: (_a, ctx) => {
      signal = ctx.signal
      return never()
    } }])
    const [r] = await gate.execute([{ id: 'h', name: 'hang' }])
    assertFailure(r, 'timeout',
      'Tool "hang" did not finish within its time limit of 80 ms and was stopped. It can change state and was stopped part-way, so its effect is unknown: check whether it took effect before retrying.')
    assert.equal(r.retryable, false, 'a write that timed out may have taken effect')
    assert.equal(r.attempts, 1)
    assert.deepEqual(marks(r), [...ADMITTED, 'invoke:timeout'])
    assert.equal(signal.aborted, true)
    assert.equal(signal.reason.name, 'TimeoutError')
    assert.equal(gate.running, 0)
  })

  it('marks a timed-out read-only call retryable', async () => {
    const { gate } = gateWith([{ name: 'slow_read', readOnly: true, timeoutMs: 60, retry: false, handler: never }])
    const [r] = await gate.execute([{ name: 'slow_read' }])
    assertFailure(r, 'timeout', 'within its time limit of 60 ms', 'It only reads, so nothing changed: retry with a narrower request')
    assert.equal(r.retryable, true)
  })

  it('uses the executor default and caps a tool limit at maxTimeoutMs', async () => {
    const { gate } = gateWith([
      { name: 'defaulted', handler: never },
      { name: 'capped', timeoutMs: 600_000, handler: never },
    ], { defaultTimeoutMs: 70, maxTimeoutMs: 90 })
    const [a, b] = await gate.execute([{ name: 'defaulted' }, { name: 'capped' }])
    assertFailure(a, 'timeout', 'time limit of 70 ms')
    assertFailure(b, 'timeout', 'time limit of 90 ms')
  })

  it('keeps the timeout when a handler ignores its signal and resolves after its deadline', async () => {
    const late = deferred()
    const { gate } = gateWith([{ name: 'stubborn', timeoutMs: 50, handler: async () => {
      await sleep(150)
      late.resolve()
      return 'too late'
    } }])
    const results = await gate.execute([{ name: 'stubborn' }])
    assertFailure(results[0], 'timeout')
    const snapshot = structuredClone(results)
    await late.promise
    await sleep(100)
    // The late value arrived and changed nothing.
    assert.deepEqual(results, snapshot)
    assert.equal(gate.running, 0)
    // The executor still works afterwards.
    const { gate: again } = gateWith([{ name: 'quick', handler: () => 'fine' }])
    assertSuccess((await again.execute([{ name: 'quick' }]))[0], 'fine')
  })

  it('lets a handler finish in time even with a short limit', async () => {
    const r = await runOne(async () => {
      await sleep(5)
      return 'made it'
    }, { timeoutMs: 2000 })
    assertSuccess(r, 'made it')
  })
})

describe('values that escape the JS layer', () => {
  it('answers a return value whose toJSON gives undefined as no output, in a process that does not crash', async () => {
    // Run in a child: an unhandled rejection from the settle path would end the whole process.
    const script = `
      const { ToolExecutor } = require('..')
      const gate = new ToolExecutor({ defaultTimeoutMs: 5000 })
      gate.register({ name: 'odd', handler: () => ({ toJSON() { return undefined } }) })
      gate.execute([{ name: 'odd' }]).then((r) => console.log(JSON.stringify(r.map((x) => [x.success, x.output]))))
    `
    const child = await runChild(script)
    assert.equal(child.timedOut, false)
    assert.equal(child.code, 0, child.stderr)
    assert.deepEqual(lastJsonLine(child.stdout), [[true, '(no output)']])
  })
})
