// A user-style ava suite: ava runs each file in a worker thread of its own.
const test = require('ava')
const { weatherGate } = require('../tools.js')

test('a valid call runs and returns its JSON', async (t) => {
  const [result] = await weatherGate().execute([{ type: 'tool_use', id: 't1', name: 'get_weather', input: { city: 'Lisbon' } }])
  t.true(result.success)
  t.deepEqual(JSON.parse(result.output), { city: 'Lisbon', tempC: 21 })
})

test('a call without its city is refused before the handler runs', async (t) => {
  const [result] = await weatherGate().execute([{ type: 'tool_use', id: 't2', name: 'get_weather', input: {} }])
  t.is(result.errorKind, 'invalid_arguments')
  t.true(result.error.includes('missing required property "city"'))
})
