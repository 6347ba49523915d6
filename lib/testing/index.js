'use strict'
// toolgate/testing: what an agent's test suite needs around a gate. Time the test moves (manualClock), handlers
// with the behaviours that break agents (mocks), a model that replays a script and the loop that runs it
// (scriptedModel, runAgentLoop), and assertions on results for any test runner.

const { manualClock, ManualClock } = require('./clock.js')
const mocks = require('./mocks.js')
const { scriptedModel, runAgentLoop } = require('./model.js')
const { expectResult, toolgateMatchers } = require('./assertions.js')

module.exports = { manualClock, ManualClock, ...mocks, scriptedModel, runAgentLoop, expectResult, toolgateMatchers }
