'use strict'
// The testing kit's scripted model streams its turns in each provider's stream format, at times a manual clock
// sets, and the agent loop runs a streamed turn's calls as they arrive.

const { describe, it } = require('node:test')
const assert = require('node:assert/strict')
const { ToolExecutor } = require('..')
const { manualClock, scriptedModel, runAgentLoop } = require('toolgate/testing')

const FORMATS = ['anthropic', 'openai-responses', 'openai-chat', 'gemini', 'bedrock']

function searchGate(options) {
  const gate = new ToolExecutor(options)
  const started = []
  gate.register({
    name: 'search',
    readOnly: true,
    parameters: { type: 'object', properties: { q: { type: 'string' } }, required: ['q'] },
    handler: ({ q }) => {
      started.push(q)
      return `found ${q}`
    },
  })
  return { gate, started }
}

describe('scriptedModel streaming', () => {
  for (const format of FORMATS) {
    it(`streams a turn as ${format} events that tap() reads back into the script's calls`, async () => {
      const { gate } = searchGate()
      const model = scriptedModel([{ text: 'Looking.', calls: [{ id: 'a', name: 'search', arguments: { q: 'cats' } }, { name: 'search', input: '{"q": "dogs"}' }] }])
      const turn = gate.turn()
      let events = 0
      for await (const _event of turn.tap(model.stream([{ role: 'user', content: 'Go.' }], { format }), format)) events += 1
      assert.ok(events >= 4, `text and two calls take several events: ${events}`)
      const results = await turn.results
      assert.deepEqual(results.map((r) => r.output), ['found cats', 'found dogs'])
      assert.equal(results[0].callId, 'a', 'the script\'s id is the streamed call\'s')
      assert.match(results[1].callId, /\S/, 'a call without an id gets one')
      assert.equal(model.requests.length, 1)
      await gate.close()
    })
  }

  it('puts its events at the times the manual clock gives: a call runs while the next is still streaming', async () => {
    const clock = manualClock()
    const { gate, started } = searchGate({ clock })
    const model = scriptedModel([{ calls: [{ id: 'a', name: 'search', arguments: { q: 'first' } }, { id: 'b', name: 'search', arguments: { q: 'second' } }] }])
    const turn = gate.turn()
    const reading = (async () => {
      for await (const _event of turn.tap(model.stream([], { format: 'anthropic', clock, everyMs: 100 }), 'anthropic'));
    })()
    // message_start at 0; the first call's start at 100, its arguments in two pieces at 200 and 300, its stop at 400.
    await clock.advance(350)
    assert.deepEqual(started, [], 'not before its arguments are complete')
    await clock.advance(50)
    assert.deepEqual(started, ['first'], 'at 400 ms, on the manual clock, while the second call is not yet streamed')
    await clock.advance(350)
    assert.deepEqual(started, ['first'])
    await clock.advance(50)
    assert.deepEqual(started, ['first', 'second'], 'the second call\'s stop at 800 ms')
    await clock.advance(1_000)
    await reading
    assert.equal((await turn.results).length, 2)
    await gate.close()
  })

  it('refuses an unknown format, a bad everyMs or clock, and a script already spent', () => {
    const model = scriptedModel(['done'])
    assert.throws(() => model.stream([], { format: 'ai-sdk' }), { name: 'TypeError', message: /format must be one of anthropic, openai-responses, openai-chat, gemini, bedrock/ })
    assert.throws(() => model.stream([], { format: 'gemini', everyMs: -1 }), { name: 'TypeError', message: /everyMs/ })
    assert.throws(() => model.stream([], { format: 'gemini', clock: {} }), { name: 'TypeError', message: /clock must be a manualClock/ })
    model.stream([], { format: 'gemini' })
    assert.throws(() => model.stream([], { format: 'gemini' }), /the script has 1 turns/)
  })
})

describe('runAgentLoop({ stream })', () => {
  for (const format of FORMATS) {
    it(`runs each streamed turn's calls as they arrive, with the transcript execute() would give (${format})`, async () => {
      const script = () => scriptedModel([{ text: 'Looking.', calls: [{ id: 'a', name: 'search', arguments: { q: 'cats' } }, { id: 'b', name: 'search', arguments: { q: 'dogs' } }] }, 'Done.'])
      const streamed = searchGate()
      const viaStream = await runAgentLoop(streamed.gate, script(), { format, stream: true })
      const whole = searchGate()
      const viaExecute = await runAgentLoop(whole.gate, script(), { format })
      assert.equal(viaStream.text, 'Done.')
      assert.deepEqual(viaStream.turns[0].results.map((r) => r.output), ['found cats', 'found dogs'])
      const timeless = (transcript) => JSON.parse(JSON.stringify(transcript).replace(/"latencyMs":[\d.]+/g, ''))
      assert.deepEqual(timeless(viaStream.transcript), timeless(viaExecute.transcript))
      await streamed.gate.close()
      await whole.gate.close()
    })
  }

  it('is refused for the AI SDK format, which streams through streamText', async () => {
    const { gate } = searchGate()
    await assert.rejects(runAgentLoop(gate, scriptedModel(['x']), { format: 'ai-sdk', stream: true }), { name: 'TypeError', message: /streamText/ })
    await gate.close()
  })
})
