'use strict'
// The release's staging step: moves each built binary from the downloaded artifacts into its platform package
// (`napi artifacts`), then checks what is about to be published: every napi target's package holds its binary and
// only that, at the main package's version, and the main package carries no binary of its own.
//   node scripts/stage-release.js <artifacts-dir>

const { spawnSync } = require('node:child_process')
const fs = require('node:fs')
const path = require('node:path')
const { platformOf } = require('../lib/platform.js')

const ROOT = path.resolve(__dirname, '..')
const pkg = require('../package.json')

function stage(artifacts) {
  const napi = path.join(ROOT, 'node_modules', '@napi-rs', 'cli', 'dist', 'cli.js')
  const moved = spawnSync(process.execPath, [napi, 'artifacts', '--output-dir', artifacts, '--npm-dir', 'npm'], { cwd: ROOT, stdio: 'inherit' })
  if (moved.status !== 0) throw new Error('napi artifacts failed')
  // napi artifacts also drops a copy of every binary beside the loader, where `files` would ship all of them in
  // the main package: the binaries belong in the platform packages only.
  for (const file of fs.readdirSync(ROOT).filter((f) => /^toolgate\..+\.node$/.test(f))) fs.rmSync(path.join(ROOT, file))
  const problems = []
  for (const platform of pkg.napi.targets.map(platformOf)) {
    const dir = path.join(ROOT, 'npm', platform)
    const sub = JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8'))
    if (sub.version !== pkg.version) problems.push(`${sub.name} is at ${sub.version}, the main package at ${pkg.version}`)
    if (pkg.optionalDependencies?.[sub.name] !== pkg.version) problems.push(`${sub.name} is not an optional dependency at ${pkg.version}`)
    const binary = path.join(dir, sub.main)
    if (!fs.existsSync(binary) || fs.statSync(binary).size < 1024 * 1024) problems.push(`${sub.name} has no binary (${sub.main})`)
  }
  const stray = fs.readdirSync(ROOT).filter((f) => f.endsWith('.node'))
  if (stray.length > 0) problems.push(`the main package would carry ${stray.join(', ')}`)
  if (problems.length > 0) throw new Error(problems.join('\n'))
}

if (require.main === module) {
  const [artifacts] = process.argv.slice(2)
  if (!artifacts) {
    console.error('usage: node scripts/stage-release.js <artifacts-dir>')
    process.exit(2)
  }
  try {
    stage(path.resolve(artifacts))
    console.log(`stage-release: ${pkg.napi.targets.length} platform packages hold their binaries at ${pkg.version}`)
  } catch (error) {
    console.error(`stage-release: ${error.message}`)
    process.exit(1)
  }
}
