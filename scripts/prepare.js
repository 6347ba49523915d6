'use strict'
// npm's `prepare`: runs after `npm install` in a checkout (a clone, or a git dependency npm cloned) and before
// `npm pack` / `npm publish`. It builds only when it must: packing needs no binary (binaries ship in the
// per-platform packages), and a checkout whose binary already loads, its own or the prebuilt package npm installed,
// has nothing to build. Otherwise it builds from source, and says so clearly when Rust is missing.

const { spawnSync } = require('node:child_process')
const path = require('node:path')

const ROOT = path.resolve(__dirname, '..')
const command = process.env.npm_command

if (command === 'pack' || command === 'publish') process.exit(0)

const loads = spawnSync(process.execPath, ['-e', "require('./lib/native.js')"], { cwd: ROOT, stdio: 'ignore' })
if (loads.status === 0) process.exit(0)

const build = spawnSync(process.execPath, [path.join(__dirname, 'build.js')], { cwd: ROOT, stdio: 'inherit' })
process.exit(build.status ?? 1)
