'use strict'
// The tools the example suites (vitest/, ava/) test, as an application would keep them in a module of its own.

const { ToolExecutor } = require('../index.js')

function weatherGate() {
  const gate = new ToolExecutor()
  gate.register({
    name: 'get_weather',
    readOnly: true,
    parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
    handler: ({ city }) => ({ city, tempC: 21 }),
  })
  return gate
}

module.exports = { weatherGate }
