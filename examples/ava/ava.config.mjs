// The example suite under ava's defaults (each file in a worker thread of its own), one file after another as on
// a machine with one core.
export default {
  files: ['examples/ava/*.test.js'],
  workerThreads: true,
  concurrency: 1,
}
