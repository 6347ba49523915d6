'use strict'
// Whether this checkout's engine is built: a local binary for this machine newer than every Rust source. `npm
// install` (scripts/prepare.js) and `npm test` (scripts/test.js) build only when it is not.

const fs = require('node:fs')
const path = require('node:path')
const { hostPlatform } = require('../lib/engine/platform.js')

const ROOT = path.resolve(__dirname, '..')
const SOURCES = ['src', 'crates', 'build.rs', 'Cargo.toml', 'Cargo.lock']

/** The newest modification time among the Rust sources, in ms (0 when there are none). */
function newestSource() {
  let newest = 0
  const visit = (file) => {
    const stat = fs.statSync(file, { throwIfNoEntry: false })
    if (!stat) return
    if (stat.isDirectory()) {
      for (const entry of fs.readdirSync(file)) if (entry !== 'target') visit(path.join(file, entry))
    } else newest = Math.max(newest, stat.mtimeMs)
  }
  for (const source of SOURCES) visit(path.join(ROOT, source))
  return newest
}

function isBuilt() {
  const local = fs.statSync(path.join(ROOT, `toolgate.${hostPlatform().name}.node`), { throwIfNoEntry: false })
  return Boolean(local && local.mtimeMs >= newestSource())
}

module.exports = { isBuilt }
