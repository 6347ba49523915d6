'use strict'
// npm's `prepare`: runs after `npm install` in a checkout (a clone, or a git dependency npm cloned) and before
// `npm pack` / `npm publish`. Packing needs no binary (binaries ship in the per-platform packages). Otherwise the
// checkout needs an engine built from its own source: a local binary newer than every Rust source is kept, and
// anything else is built. Without Rust, a prebuilt package for this platform (an optional dependency) is used with
// a warning, since it is a release's engine, not this checkout's; with neither, it stops and says what to install.

const { spawnSync } = require('node:child_process')
const fs = require('node:fs')
const path = require('node:path')
const { hostPlatform } = require('../lib/platform.js')

const ROOT = path.resolve(__dirname, '..')
const SOURCES = ['src', 'crates', 'build.rs', 'Cargo.toml', 'Cargo.lock']
const HOST = hostPlatform().name

if (process.env.npm_command === 'pack' || process.env.npm_command === 'publish') process.exit(0)

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

const local = fs.statSync(path.join(ROOT, `toolgate.${HOST}.node`), { throwIfNoEntry: false })
if (local && local.mtimeMs >= newestSource()) process.exit(0)

const hasCargo = !spawnSync('cargo', ['--version'], { stdio: 'ignore' }).error
if (!hasCargo) {
  const prebuilt = `${require('../package.json').napi.packageName}-${HOST}`
  const loads = spawnSync(process.execPath, ['-e', `require(${JSON.stringify(prebuilt)})`], { cwd: ROOT, stdio: 'ignore' })
  if (loads.status === 0) {
    console.warn(
      'toolgate: no Rust toolchain to build this checkout\'s engine; using the prebuilt binary package for ' +
        `${HOST}, the engine of the published release. Install Rust (https://rustup.rs) and run ` +
        '`npm run build` to build this checkout\'s own.',
    )
    process.exit(0)
  }
}
const build = spawnSync(process.execPath, [path.join(__dirname, 'build.js')], { cwd: ROOT, stdio: 'inherit' })
process.exit(build.status ?? 1)
