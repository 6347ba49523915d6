'use strict'
// Loads the native engine. The generated loader (binding.js) picks this platform's binary: a local
// `toolgate.<platform>.node` (a build from source) or the `@toolgate/binding-<platform>` package npm installed as an
// optional dependency. When neither loads, its own error blames an npm bug; this one says what was looked for, what
// exists and how to get a binary.

try {
  module.exports = require('../../binding.js')
} catch (error) {
  // Only on failure: loading the platform tables costs every successful start a read of package.json.
  throw require('./platform.js').missingBinaryError(error)
}
