'use strict'
// What the machine line of a results section names: package versions and the output of a command.

const { execFileSync } = require('node:child_process')
const fs = require('node:fs')
const path = require('node:path')

function versionOf(pkg) {
  try {
    return require(`${pkg}/package.json`).version
  } catch {
    // Packages whose exports hide package.json: read it from where node_modules keeps it.
    return JSON.parse(fs.readFileSync(path.join(__dirname, '..', 'node_modules', pkg, 'package.json'), 'utf8')).version
  }
}

/** A command's output, or 'unknown' when it cannot run. */
function run(command) {
  try {
    return execFileSync(command[0], command.slice(1), { encoding: 'utf8' }).trim()
  } catch {
    return 'unknown'
  }
}

module.exports = { run, versionOf }
