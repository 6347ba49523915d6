// The ESM entry of toolgate/testing: the CommonJS module's own objects, so that a suite that both imports and
// requires it shares one clock class and one set of mocks.
import kit from './index.js'

export const {
  manualClock, ManualClock, ok, throws, rejectsWith, hangs, hangsIgnoringSignal, slow, flaky, huge, progressThenSilence,
  leaksSecret, scriptedModel, runAgentLoop, expectResult, toolgateMatchers, loadRecording, replay, expectUnchanged,
} = kit
