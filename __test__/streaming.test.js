'use strict'
// Streaming turns: calls added as they arrive, scheduled as `execute` schedules a turn handed over whole, each result
// handed on as it settles, and provider streams read for their calls while their events pass through.

const { describe, it } = require('node:test')
const assert = require('node:assert/strict')
const { ToolExecutor } = require('..')
const { deferred, generator, kinds, sleep } = require('./helpers.js')
const { manualClock } = require('toolgate/testing')

const number = { type: 'object', properties: { n: { type: 'number' } } }

/** Tools whose handlers wait until the test lets them go (`release(name, n)`), logging starts and ends. */
function heldTools(options = {}) {
  const gate = new ToolExecutor(options)
  const log = []
  const waiting = new Map()
  const handler = (kind) => async ({ n }) => {
    log.push(`start ${kind}${n}`)
    const gate = deferred()
    waiting.set(`${kind}${n}`, gate)
    await gate.promise
    log.push(`end ${kind}${n}`)
    if (n < 0) throw new Error(`${kind} failed`)
    return `${kind}${n}`
  }
  gate.register({ name: 'read', readOnly: true, parameters: number, handler: handler('r') })
  gate.register({ name: 'write', parameters: number, handler: handler('w') })
  const release = async (key) => {
    for (let i = 0; i < 50 && !waiting.has(key); i++) await sleep(1)
    assert.ok(waiting.has(key), `${key} started`)
    waiting.get(key).resolve()
    waiting.delete(key)
    await sleep(2)
  }
  return { gate, log, release }
}

const read = (n) => ({ id: `r${n}`, name: 'read', arguments: { n } })
const write = (n) => ({ id: `w${n}`, name: 'write', arguments: { n } })

describe('a streaming turn', () => {
  it('starts a read added while reads run at once, holds a write until every call before it ended, and the calls after it until it did', async () => {
    const { gate, log, release } = heldTools()
    const turn = gate.turn()
    turn.add(read(1))
    await sleep(2)
    turn.add(read(2))
    await sleep(2)
    assert.deepEqual(log, ['start r1', 'start r2'], 'the second read joined the first')
    turn.add(write(3))
    turn.add(read(4))
    await sleep(2)
    assert.deepEqual(log, ['start r1', 'start r2'], 'the write waits; the read after it waits for the write')
    await release('r1')
    await release('r2')
    assert.deepEqual(log.slice(4), ['start w3'])
    await release('w3')
    assert.deepEqual(log.slice(5), ['end w3', 'start r4'])
    await release('r4')
    turn.end()
    const results = await turn.results
    assert.deepEqual(results.map((r) => r.output), ['r1', 'r2', 'w3', 'r4'])
    await gate.close()
  })

  it('hands each result on once, as it settles, and resolves results in the order the calls were added', async () => {
    const { gate, release } = heldTools()
    const turn = gate.turn()
    const seen = []
    const reading = (async () => {
      for await (const result of turn) seen.push(result.callId)
    })()
    turn.add(read(1))
    turn.add(read(2))
    turn.add({ id: 'x', name: 'nope' })
    await sleep(2)
    assert.deepEqual(seen, ['x'], 'a call answered without running is handed on at once')
    const second = turn.add(read(5))
    await release('r2')
    assert.deepEqual(seen, ['x', 'r2'])
    await release('r5')
    assert.equal((await second).output, 'r5', 'add() resolves to its own call\'s result')
    await release('r1')
    turn.end()
    await reading
    assert.deepEqual(seen, ['x', 'r2', 'r5', 'r1'])
    assert.deepEqual((await turn.results).map((r) => r.callId), ['r1', 'r2', 'x', 'r5'])
    const again = []
    for await (const result of turn) again.push(result.callId)
    assert.deepEqual(again, seen, 'a reader that comes late reads them all, in the order they settled')
    await gate.close()
  })

  it('is not over until it is ended, and ending it again changes nothing', async () => {
    const { gate } = heldTools()
    const turn = gate.turn()
    let over = false
    turn.results.then(() => (over = true))
    await sleep(5)
    assert.equal(over, false)
    assert.equal(turn.open, true)
    turn.end()
    turn.end()
    assert.deepEqual(await turn.results, [])
    assert.equal(turn.open, false)
    await gate.close()
  })

  it('throws a TypeError for add() after end() or cancel(), and for a programmer error in its options', async () => {
    const { gate } = heldTools()
    const ended = gate.turn()
    ended.end()
    assert.throws(() => ended.add(read(1)), { name: 'TypeError', message: /takes no more calls \(it was ended\)/ })
    const cancelled = gate.turn()
    cancelled.cancel()
    assert.throws(() => cancelled.add(read(1)), { name: 'TypeError', message: /it was cancelled/ })
    assert.throws(() => gate.turn({ signal: {} }), { name: 'TypeError', message: /^turn\(\{ signal \}\): signal must be an AbortSignal/ })
    assert.throws(() => gate.turn({ onProgress: 1 }), { name: 'TypeError', message: /onProgress must be a function/ })
    assert.throws(() => gate.turn({ stopOnErorr: true }), { name: 'TypeError', message: /stopOnErorr/ })
    await gate.close()
    assert.throws(() => gate.turn(), { name: 'TypeError', message: /closed/ })
  })

  it('cancel() ends running and waiting calls as cancelled, as aborting execute()\'s signal does', async () => {
    const { gate, log } = heldTools()
    const turn = gate.turn()
    let aborted
    gate.register({ name: 'watch', readOnly: true, handler: (_args, ctx) => new Promise((resolve) => ctx.signal.addEventListener('abort', () => resolve((aborted = ctx.signal.reason)))) })
    turn.add({ id: 'watch', name: 'watch' })
    turn.add(write(1))
    await sleep(2)
    turn.cancel('the user pressed stop')
    const results = await turn.results
    assert.deepEqual(kinds(results), ['cancelled', 'cancelled'])
    assert.match(results[0].error, /the user pressed stop/)
    assert.match(results[1].error, /was not run/)
    assert.equal(aborted, 'the user pressed stop', 'the handler\'s signal carries the reason')
    assert.deepEqual(log, [], 'the write never started')
    await gate.close()
  })

  it('is ended by its signal, by its time limit counted from turn(), and by close(): nothing hangs', async () => {
    const { gate } = heldTools()
    const controller = new AbortController()
    const bySignal = gate.turn({ signal: controller.signal })
    bySignal.add(read(1))
    controller.abort()
    assert.deepEqual(kinds(await bySignal.results), ['cancelled'])
    assert.throws(() => bySignal.add(read(2)), TypeError)

    const aborted = gate.turn({ signal: AbortSignal.abort() })
    assert.deepEqual(await aborted.results, [], 'a signal fired before the turn opened ends it at once')

    // On a clock the test moves: the limit counts from turn(), not from the add.
    const clock = manualClock()
    const timed = heldTools({ clock }).gate
    const byLimit = timed.turn({ deadlineMs: 40 })
    await clock.advance(25)
    byLimit.add(read(3))
    await clock.advance(15)
    assert.deepEqual(kinds(await byLimit.results), ['timeout'])
    assert.equal(byLimit.open, false)
    await timed.close({ timeoutMs: 10 })

    const byClose = gate.turn()
    byClose.add(read(4))
    const { stillRunning } = await gate.close({ timeoutMs: 50 })
    assert.deepEqual(kinds(await byClose.results), ['cancelled'])
    assert.ok(stillRunning.some((handler) => handler.callId === 'r4'), 'r4 ignores its signal: reported as close() reports it')
  })

  it('refuses an add() from code its own end runs (an abort listener at its time limit) with a TypeError, and nothing else fails', async () => {
    const gate = new ToolExecutor()
    let turn
    let refused
    gate.register({ name: 'quick', readOnly: true, handler: () => new Promise((resolve) => setTimeout(resolve, 60, 'quick')) })
    gate.register({ name: 'job', readOnly: true, handler: (_args, ctx) => new Promise(() => ctx.signal.addEventListener('abort', () => {
      try {
        turn.add({ id: 'cleanup', name: 'quick' })
      } catch (err) {
        refused = err
      }
    })) })
    const other = gate.execute([{ id: 'other', name: 'quick' }])
    turn = gate.turn({ deadlineMs: 30 })
    turn.add({ id: 'j', name: 'job' })
    assert.deepEqual(kinds(await turn.results), ['timeout'])
    assert.ok(refused instanceof TypeError, `add() threw ${refused}`)
    assert.deepEqual(kinds(await other), ['ok'], 'another turn of the gate is untouched')
    await gate.close({ timeoutMs: 10 })
  })

  it('counts a call\'s queuedMs and startedAt from its add(), not from turn()', async () => {
    const gate = new ToolExecutor()
    gate.register({ name: 'quick', readOnly: true, handler: () => 'ok' })
    const turn = gate.turn()
    await sleep(60)
    const before = Date.now()
    const result = await turn.add({ name: 'quick' })
    assert.ok(result.metadata.queuedMs < 30, `queued ${result.metadata.queuedMs} ms`)
    assert.ok(result.metadata.startedAt >= before - 1, 'started when it was added')
    turn.end()
    await gate.close()
  })

  it('with stopOnError, a failed write stops the calls added after it, not only those waiting', async () => {
    const { gate, release } = heldTools()
    const turn = gate.turn({ stopOnError: true })
    turn.add(write(-1))
    await release('w-1')
    turn.add(read(2))
    turn.add({ id: 'bad', name: 'read', arguments: { n: 'two' } })
    turn.end()
    const results = await turn.results
    assert.deepEqual(kinds(results), ['handler_error', 'not_executed', 'invalid_arguments'], 'as execute() answers the same calls')
    await gate.close()
  })

  it('counts per-turn budgets and its context over every call added', async () => {
    const gate = new ToolExecutor()
    gate.register({ name: 'echo', readOnly: true, handler: (_args, ctx) => ctx.context.user })
    const turn = gate.turn({ context: { user: 'ada', budget: { maxCallsPerTurn: 2 } } })
    turn.add({ name: 'echo' })
    turn.add({ name: 'echo' })
    await sleep(5)
    turn.add({ name: 'echo' })
    turn.end()
    const results = await turn.results
    assert.deepEqual(results.map((r) => r.output.slice(0, 3)), ['ada', 'ada', 'Err'])
    assert.deepEqual(kinds(results), ['ok', 'ok', 'budget_exceeded'])
    await gate.close()
  })
})

describe('a streaming turn against execute()', () => {
  /** What two runs of the same calls may differ in: when things happened, and the stacks that led there. */
  const timeless = (result) => {
    const { latencyMs, metadata, ...rest } = result
    const { startedAt, queuedMs, stack, ...kept } = metadata
    return { ...rest, metadata: kept }
  }

  /** A gate whose handlers answer from their arguments alone, after the wait the arguments say. */
  function gateOf(options) {
    const gate = new ToolExecutor(options)
    const handler = async ({ k, ms, fail }) => {
      if (ms > 0) await sleep(ms)
      else if (ms === 0) await null
      if (fail) throw new Error(`failed ${k}`)
      return `did ${k}`
    }
    const parameters = { type: 'object', properties: { k: { type: 'number' }, ms: { type: 'number' }, fail: { type: 'boolean' } }, required: ['k'] }
    gate.register({ name: 'read', readOnly: true, parameters, handler })
    gate.register({ name: 'write', parameters, handler })
    return gate
  }

  it('gives what execute() gives for the same calls, whatever the order and timing of the adds (property)', async () => {
    const random = generator(Number(process.env.TOOLGATE_PROPERTY_SEED ?? 20261206))
    for (let round = 0; round < 60; round++) {
      const options = { concurrency: random.pick([1, 2, 8]) }
      const turnOptions = random.chance(0.4) ? { stopOnError: true } : {}
      const calls = Array.from({ length: 1 + random.int(8) }, (_, k) => {
        const shape = random.int(10)
        if (shape === 0) return { id: `c${k}`, name: 'nothing_by_that_name' }
        if (shape === 1) return { id: `c${k}`, name: 'read', arguments: { k: 'not a number' } }
        const args = { k, ms: random.pick([-1, 0, 1, 3]), fail: random.chance(0.2) }
        return { id: `c${k}`, name: random.chance(0.6) ? 'read' : 'write', arguments: args }
      })
      const whole = gateOf(options)
      const expected = await whole.execute(calls, turnOptions)
      await whole.close()

      const streamed = gateOf(options)
      const turn = streamed.turn(turnOptions)
      const running = new Set()
      for (const call of calls) {
        const gap = random.int(4)
        if (gap === 1) await null
        else if (gap === 2) await sleep(random.int(4))
        else if (gap === 3) await new Promise(setImmediate)
        turn.add(call)
        running.add(call.id)
      }
      turn.end()
      const got = await turn.results
      await streamed.close()
      assert.deepEqual(got.map(timeless), expected.map(timeless), `round ${round}: ${JSON.stringify({ options, turnOptions, calls })}`)
    }
  })
})

describe('tap()', () => {
  /** An async iterable of `events`, a pause before each, that throws `error` at its end when given. */
  async function* streamOf(events, { error, pauseMs = 0 } = {}) {
    for (const event of events) {
      if (pauseMs) await sleep(pauseMs)
      yield event
    }
    if (error) throw error
  }

  function echoGate() {
    const gate = new ToolExecutor({ redact: { patterns: ['sk-[a-z0-9]{8,}'] } })
    const started = []
    const handler = (name) => (args) => {
      started.push(name)
      return `${name} ${JSON.stringify(args)}`
    }
    gate.register({ name: 'search', readOnly: true, parameters: { type: 'object', properties: { q: { type: 'string' } } }, handler: handler('search') })
    gate.register({ name: 'save', parameters: { type: 'object', properties: { text: { type: 'string' } } }, handler: handler('save') })
    return { gate, started }
  }

  /** Reads all of a tap, and what it yielded. */
  async function drain(tapped) {
    const events = []
    for await (const event of tapped) events.push(event)
    return events
  }

  const FORMATS = {
    anthropic: [
      { type: 'message_start', message: { id: 'msg_1', content: [] } },
      { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } },
      { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'Looking.' } },
      { type: 'content_block_stop', index: 0 },
      { type: 'content_block_start', index: 1, content_block: { type: 'tool_use', id: 'toolu_1', name: 'search', input: {} } },
      { type: 'content_block_delta', index: 1, delta: { type: 'input_json_delta', partial_json: '{"q": "ca' } },
      { type: 'content_block_delta', index: 1, delta: { type: 'input_json_delta', partial_json: 'ts"}' } },
      { type: 'content_block_stop', index: 1 },
      { type: 'content_block_start', index: 2, content_block: { type: 'tool_use', id: 'toolu_2', name: 'save', input: {} } },
      { type: 'content_block_delta', index: 2, delta: { type: 'input_json_delta', partial_json: '{"text": "hi"}' } },
      { type: 'content_block_stop', index: 2 },
      { type: 'message_delta', delta: { stop_reason: 'tool_use' } },
      { type: 'message_stop' },
    ],
    'openai-responses': [
      { type: 'response.created', response: { id: 'resp_1' } },
      { type: 'response.output_item.added', output_index: 0, item: { type: 'function_call', id: 'fc_1', call_id: 'call_1', name: 'search', arguments: '' } },
      { type: 'response.function_call_arguments.delta', output_index: 0, item_id: 'fc_1', delta: '{"q":' },
      { type: 'response.function_call_arguments.delta', output_index: 0, item_id: 'fc_1', delta: ' "cats"}' },
      { type: 'response.function_call_arguments.done', output_index: 0, item_id: 'fc_1', arguments: '{"q": "cats"}' },
      { type: 'response.output_item.done', output_index: 0, item: { type: 'function_call', id: 'fc_1', call_id: 'call_1', name: 'search', arguments: '{"q": "cats"}' } },
      { type: 'response.output_item.added', output_index: 1, item: { type: 'function_call', id: 'fc_2', call_id: 'call_2', name: 'save', arguments: '' } },
      { type: 'response.function_call_arguments.delta', output_index: 1, item_id: 'fc_2', delta: '{"text": "hi"}' },
      { type: 'response.output_item.done', output_index: 1, item: { type: 'function_call', id: 'fc_2', call_id: 'call_2', name: 'save', arguments: '{"text": "hi"}' } },
      { type: 'response.completed', response: { id: 'resp_1' } },
    ],
    'openai-chat': [
      { id: 'c1', choices: [{ index: 0, delta: { role: 'assistant', content: 'Looking.' }, finish_reason: null }] },
      { id: 'c1', choices: [{ index: 0, delta: { tool_calls: [{ index: 0, id: 'call_1', type: 'function', function: { name: 'search', arguments: '' } }] }, finish_reason: null }] },
      { id: 'c1', choices: [{ index: 0, delta: { tool_calls: [{ index: 0, function: { arguments: '{"q": "cats"}' } }] }, finish_reason: null }] },
      { id: 'c1', choices: [{ index: 0, delta: { tool_calls: [{ index: 1, id: 'call_2', type: 'function', function: { name: 'save', arguments: '{"text"' } }] }, finish_reason: null }] },
      { id: 'c1', choices: [{ index: 0, delta: { tool_calls: [{ index: 1, function: { arguments: ': "hi"}' } }] }, finish_reason: null }] },
      { id: 'c1', choices: [{ index: 0, delta: {}, finish_reason: 'tool_calls' }] },
      { id: 'c1', choices: [], usage: { total_tokens: 9 } },
    ],
    gemini: [
      { candidates: [{ content: { role: 'model', parts: [{ text: 'Looking.' }] } }] },
      { candidates: [{ content: { role: 'model', parts: [{ functionCall: { id: 'g1', name: 'search', args: { q: 'cats' } } }] } }] },
      { candidates: [{ content: { role: 'model', parts: [{ functionCall: { id: 'g2', name: 'save', args: { text: 'hi' } } }] }, finishReason: 'STOP' }] },
    ],
    bedrock: [
      { messageStart: { role: 'assistant' } },
      { contentBlockDelta: { contentBlockIndex: 0, delta: { text: 'Looking.' } } },
      { contentBlockStop: { contentBlockIndex: 0 } },
      { contentBlockStart: { contentBlockIndex: 1, start: { toolUse: { toolUseId: 'tu_1', name: 'search' } } } },
      { contentBlockDelta: { contentBlockIndex: 1, delta: { toolUse: { input: '{"q": "ca' } } } },
      { contentBlockDelta: { contentBlockIndex: 1, delta: { toolUse: { input: 'ts"}' } } } },
      { contentBlockStop: { contentBlockIndex: 1 } },
      { contentBlockStart: { contentBlockIndex: 2, start: { toolUse: { toolUseId: 'tu_2', name: 'save' } } } },
      { contentBlockDelta: { contentBlockIndex: 2, delta: { toolUse: { input: '{"text": "hi"}' } } } },
      { contentBlockStop: { contentBlockIndex: 2 } },
      { messageStop: { stopReason: 'tool_use' } },
      { metadata: { usage: { totalTokens: 9 } } },
    ],
  }
  const IDS = { anthropic: ['toolu_1', 'toolu_2'], 'openai-responses': ['call_1', 'call_2'], 'openai-chat': ['call_1', 'call_2'], gemini: ['g1', 'g2'], bedrock: ['tu_1', 'tu_2'] }

  for (const [format, events] of Object.entries(FORMATS)) {
    it(`reads ${format} stream events: every event yielded unchanged, each call run once its arguments are complete`, async () => {
      const { gate } = echoGate()
      const turn = gate.turn()
      const yielded = await drain(turn.tap(streamOf([...events, { type: 'something_new', note: 'an event of a type not known yet' }]), format))
      assert.equal(yielded.length, events.length + 1)
      yielded.slice(0, -1).forEach((event, i) => assert.equal(event, events[i], 'the same object, not a copy'))
      const results = await turn.results
      assert.deepEqual(results.map((r) => r.callId), IDS[format])
      assert.deepEqual(results.map((r) => r.output), ['search {"q":"cats"}', 'save {"text":"hi"}'])
      assert.equal(turn.open, false, 'the turn ended with the stream')
      await gate.close()
    })
  }

  it('starts a call while the stream goes on', async () => {
    const { gate, started } = echoGate()
    const turn = gate.turn()
    let startedBeforeTheEnd
    const events = FORMATS.anthropic
    for await (const event of turn.tap(streamOf(events, { pauseMs: 2 }), 'anthropic')) {
      if (event.type === 'content_block_start' && event.index === 2) {
        await sleep(2)
        startedBeforeTheEnd = [...started]
      }
    }
    assert.deepEqual(startedBeforeTheEnd, ['search'], 'the first call ran while the second was still streaming')
    assert.equal((await turn.results).length, 2)
    await gate.close()
  })

  it('a Chat Completions call is complete when the next index starts, before its choice finishes', async () => {
    const { gate, started } = echoGate()
    const turn = gate.turn()
    let atSecondIndex
    for await (const event of turn.tap(streamOf(FORMATS['openai-chat']), 'openai-chat')) {
      if (event.choices[0]?.delta?.tool_calls?.[0]?.index === 1 && atSecondIndex === undefined) {
        await sleep(2)
        atSecondIndex = [...started]
      }
    }
    assert.deepEqual(atSecondIndex, ['search'])
    await gate.close()
  })

  it('a stream that throws: the error reaches the reader, complete calls run, a call cut inside its arguments is answered unrun', async () => {
    const { gate, started } = echoGate()
    const turn = gate.turn()
    const events = FORMATS.anthropic.slice(0, 9).concat([
      { type: 'content_block_delta', index: 2, delta: { type: 'input_json_delta', partial_json: '{"text": "key sk-abcdefgh1234 and' } },
    ])
    await assert.rejects(drain(turn.tap(streamOf(events, { error: new Error('socket hang up') }), 'anthropic')), /socket hang up/)
    const results = await turn.results
    assert.deepEqual(kinds(results), ['ok', 'invalid_arguments'])
    assert.match(results[1].error, /the stream ended inside this call's arguments, so it was not run/)
    assert.match(results[1].error, /"text": "key \[REDACTED/, 'what arrived is quoted, redacted')
    assert.doesNotMatch(results[1].error, /sk-abcdefgh1234/)
    assert.deepEqual(started, ['search'], 'the cut call never ran, though repair could have closed it')
    await gate.close()
  })

  it('a stream that ends inside a call without throwing cuts it too; a reader that stops early ends the turn', async () => {
    const { gate } = echoGate()
    const cut = gate.turn()
    await drain(cut.tap(streamOf(FORMATS['openai-chat'].slice(0, 4)), 'openai-chat'))
    assert.deepEqual(kinds(await cut.results), ['ok', 'invalid_arguments'], 'no finish_reason: the second call was cut')

    const early = gate.turn()
    for await (const event of early.tap(streamOf(FORMATS.bedrock), 'bedrock')) {
      if (event.contentBlockStop?.contentBlockIndex === 1) break
    }
    assert.deepEqual(kinds(await early.results), ['ok'])
    await gate.close()
  })

  it('refuses an unknown format or a value that is not a stream with a TypeError, and a turn that takes no calls', async () => {
    const { gate } = echoGate()
    const turn = gate.turn()
    assert.throws(() => turn.tap(streamOf([]), 'claude'), { name: 'TypeError', message: /format must be one of anthropic, openai-responses, openai-chat, gemini, bedrock; got claude/ })
    assert.throws(() => turn.tap(42, 'anthropic'), { name: 'TypeError', message: /stream must be an async iterable/ })
    turn.end()
    assert.throws(() => turn.tap(streamOf([]), 'anthropic'), { name: 'TypeError', message: /takes no more calls/ })
    await gate.close()
  })

  it('answers, unrun, each call the stream completes after the turn took its last (cancelled, past its limit, ended), and passes every event through', async () => {
    const { gate, started } = echoGate()
    const cancelled = gate.turn()
    const yielded = []
    for await (const event of cancelled.tap(streamOf(FORMATS.gemini), 'gemini')) {
      yielded.push(event)
      if (yielded.length === 1) cancelled.cancel()
    }
    assert.equal(yielded.length, 3)
    const results = await cancelled.results
    assert.deepEqual(results.map((r) => r.callId), ['g1', 'g2'], 'one result for each call the model sent')
    assert.deepEqual(kinds(results), ['cancelled', 'cancelled'])
    assert.match(results[0].error, /was not run: .*the turn had ended before the stream completed this call/)
    assert.deepEqual(started, [])

    const limited = gate.turn({ deadlineMs: 40 })
    await drain(limited.tap(streamOf(FORMATS.anthropic, { pauseMs: 5 }), 'anthropic'))
    assert.deepEqual((await limited.results).map((r) => r.callId), ['toolu_1', 'toolu_2'], 'the calls after the limit are answered too')

    // Two streams tapped into one turn at once: the first one's end ends the turn, and the second's later calls are
    // answered.
    const twice = gate.turn()
    const first = twice.tap(streamOf(FORMATS.bedrock), 'bedrock')
    const second = twice.tap(streamOf(FORMATS.gemini), 'gemini')
    const seen = []
    const reading = (async () => {
      for await (const r of twice) seen.push(r.callId)
    })()
    await Promise.all([drain(first), drain(second)])
    const both = await twice.results
    assert.deepEqual(both.map((r) => r.callId).sort(), ['g1', 'g2', 'tu_1', 'tu_2'], 'one result for each call of either stream')
    assert.ok(kinds(both).includes('cancelled'), 'the calls that came after the end were not run')
    await reading
    assert.deepEqual(seen.sort(), ['g1', 'g2', 'tu_1', 'tu_2'], 'a reader still reading gets the late ones too')
    await gate.close()
  })

  it('refuses a format that is only an inherited name', async () => {
    const { gate } = echoGate()
    const turn = gate.turn()
    for (const format of ['toString', 'constructor', '__proto__']) {
      assert.throws(() => turn.tap(streamOf([]), format), { name: 'TypeError', message: /format must be one of/ })
    }
    turn.end()
    await gate.close()
  })

  it('reads a Gemini call whose arguments Vertex AI streams by JSON path (partialArgs, willContinue), whole or cut', async () => {
    const { gate } = echoGate()
    const part = (functionCall) => ({ candidates: [{ content: { role: 'model', parts: [{ functionCall }] } }] })
    const turn = gate.turn()
    await drain(turn.tap(streamOf([
      part({ id: 'v1', name: 'search', willContinue: true }),
      part({ partialArgs: [{ jsonPath: '$.q', stringValue: 'ca', willContinue: true }], willContinue: true }),
      part({ partialArgs: [{ jsonPath: '$.q', stringValue: 'ts' }] }),
      part({ id: 'v2', name: 'save', args: { text: 'whole' } }),
      part({ id: 'v3', name: 'save', willContinue: true }),
      part({ partialArgs: [{ jsonPath: "$['text']", stringValue: 'half' }, { jsonPath: '$.__proto__', boolValue: true }], willContinue: true }),
    ]), 'gemini'))
    const results = await turn.results
    assert.deepEqual(results.map((r) => r.callId), ['v1', 'v2', 'v3'])
    assert.deepEqual(results.slice(0, 2).map((r) => r.output), ['search {"q":"cats"}', 'save {"text":"whole"}'])
    assert.equal(results[2].errorKind, 'invalid_arguments')
    assert.match(results[2].error, /stream ended inside .* \{"text":"half"\}/, 'what arrived, without the path that would reach a prototype')
    await gate.close()
  })

  it('drops a streamed argument whose JSON path skips ahead in an array or names a key of one: no memory blow-up', async () => {
    const { gate } = echoGate()
    const part = (functionCall) => ({ candidates: [{ content: { parts: [{ functionCall }] } }] })
    const turn = gate.turn()
    await drain(turn.tap(streamOf([
      part({ id: 'v1', name: 'search', willContinue: true }),
      part({ partialArgs: [{ jsonPath: '$.tags[3000000000]', stringValue: 'x' }, { jsonPath: '$.tags.length', numberValue: -1 }], willContinue: true }),
      part({ partialArgs: [{ jsonPath: '$.tags[0]', stringValue: 'first' }, { jsonPath: '$.q', stringValue: 'cats' }] }),
    ]), 'gemini'))
    const [result] = await turn.results
    assert.equal(result.output, 'search {"tags":["first"],"q":"cats"}')
    await gate.close()
  })

  it('passes over a Chat Completions custom tool call, which is not the gate\'s to run', async () => {
    const { gate } = echoGate()
    const turn = gate.turn()
    const chunk = (toolCall, finish = null) => ({ choices: [{ index: 0, delta: toolCall ? { tool_calls: [toolCall] } : {}, finish_reason: finish }] })
    await drain(turn.tap(streamOf([
      chunk({ index: 0, id: 'cu', type: 'custom', custom: { name: 'grammar', input: 'free text' } }),
      chunk({ index: 0, custom: { input: ' more' } }),
      chunk({ index: 1, id: 'call_1', type: 'function', function: { name: 'search', arguments: '{"q":"cats"}' } }),
      chunk(null, 'tool_calls'),
    ]), 'openai-chat'))
    assert.deepEqual((await turn.results).map((r) => r.callId), ['call_1'])
    await gate.close()
  })

  it('ignores odd events: null, strings, parts that are not objects, a delta for a block never started', async () => {
    const { gate } = echoGate()
    const turn = gate.turn()
    const odd = [null, 'text', 7, { choices: 'x' }, { candidates: [{ content: { parts: [null, 3, { functionCall: 'no' }] } }] }, { type: 'content_block_delta', index: 9, delta: { type: 'input_json_delta', partial_json: '{' } }, { type: 'content_block_stop', index: 9 }]
    for (const format of ['anthropic', 'gemini', 'openai-chat']) {
      const t = gate.turn()
      assert.equal((await drain(t.tap(streamOf(odd), format))).length, odd.length)
      assert.deepEqual(await t.results, [])
    }
    turn.end()
    await gate.close()
  })
})

describe('a streaming turn whose answered calls were handed on', () => {
  it('is cancelled, ended by its deadline or closed without failing the engine, and a bystander turn keeps its results', async () => {
    for (const end of ['cancel', 'close']) {
      const gate = new ToolExecutor()
      gate.register({ name: 'slow', readOnly: true, parameters: { type: 'object', properties: {} }, handler: () => new Promise((resolve) => setTimeout(() => resolve('slow done'), 100)) })
      const warnings = []
      const onWarning = (w) => warnings.push(w.message)
      process.on('warning', onWarning)
      const bystander = gate.execute([{ id: 'other', name: 'slow', arguments: {} }])
      const turn = gate.turn()
      turn.add({ id: 's', name: 'slow', arguments: {} })
      const unknown = await turn.add({ id: 'x', name: 'no_such_tool', arguments: {} })
      assert.equal(unknown.errorKind, 'unknown_tool')
      if (end === 'cancel') turn.cancel('user pressed stop')
      const closing = end === 'close' ? gate.close({ timeoutMs: 500 }) : undefined
      const results = await turn.results
      await closing
      process.off('warning', onWarning)
      assert.deepEqual(results.map((r) => [r.callId, r.errorKind]), [['s', 'cancelled'], ['x', 'unknown_tool']], end)
      const [other] = await bystander
      assert.equal(end === 'cancel' ? other.output : other.errorKind, end === 'cancel' ? 'slow done' : 'cancelled', `${end}: the bystander is not failed with the engine`)
      assert.ok(!warnings.some((w) => w.includes('engine failed')), warnings.join('\n'))
      if (end === 'cancel') await gate.close()
    }
  })
})
