'use strict'
// toolgate/testing: what an agent's test suite needs around a gate. Time the test moves (manualClock), handlers
// with the behaviours that break agents (mocks), a model that replays a script and the loop that runs it
// (scriptedModel, runAgentLoop), assertions on results for any test runner, and recorded turns replayed against
// the gate as it is now (loadRecording, replay, expectUnchanged).

const { manualClock, ManualClock } = require('./clock.js')
const mocks = require('./mocks.js')
const { scriptedModel, runAgentLoop } = require('./model.js')
const { expectResult, toolgateMatchers } = require('./assertions.js')
const { loadRecording, replay, expectUnchanged } = require('./replay.js')

module.exports = { manualClock, ManualClock, ...mocks, scriptedModel, runAgentLoop, expectResult, toolgateMatchers, loadRecording, replay, expectUnchanged }
