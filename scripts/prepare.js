'use strict'
// npm's `prepare`: runs after `npm install` in a checkout (a clone, or a git dependency npm cloned) and before
// `npm pack` / `npm publish`. Packing needs no binary (binaries ship in the per-platform packages). Otherwise the
// checkout needs an engine built from its own source: a local binary newer than every Rust source is kept, and
// anything else is built. Without Rust, a prebuilt package for this platform (an optional dependency) is used with
// a warning, since it is a release's engine, not this checkout's; with neither, it stops and says what to install.

const { spawnSync } = require('node:child_process')
const path = require('node:path')
const { hostPlatform } = require('../lib/engine/platform.js')
const { isBuilt } = require('./built.js')

const ROOT = path.resolve(__dirname, '..')
const HOST = hostPlatform().name

if (process.env.npm_command === 'pack' || process.env.npm_command === 'publish') process.exit(0)
if (isBuilt()) process.exit(0)

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
