'use strict'
// The release's staging step. It moves each built binary from the downloaded artifacts into its platform package
// (`napi artifacts`) and writes the main package's optionalDependencies, one per platform package at the main
// version. They are written here, not committed: an optional dependency that is not yet published cannot be in
// package-lock.json, and `npm ci` refuses a package.json that names what its lockfile lacks. Then it checks what is
// about to be published: every platform package holds its binary, at the main version, and the main package holds
// none.
//   node scripts/stage-release.js <artifacts-dir>
//   node scripts/stage-release.js --verify     (npm's prepublishOnly: the checks alone)

const { spawnSync } = require('node:child_process')
const fs = require('node:fs')
const path = require('node:path')
const { platformOf } = require('../lib/engine/platform.js')

const ROOT = path.resolve(__dirname, '..')
const MANIFEST = path.join(ROOT, 'package.json')

/** The optionalDependencies a published main package carries: each platform package at the main version. */
function optionalDependencies(pkg) {
  return Object.fromEntries(pkg.napi.targets.map((t) => [`${pkg.napi.packageName}-${platformOf(t)}`, pkg.version]))
}

function moveArtifacts(artifacts) {
  const napi = path.join(ROOT, 'node_modules', '@napi-rs', 'cli', 'dist', 'cli.js')
  const moved = spawnSync(process.execPath, [napi, 'artifacts', '--output-dir', artifacts, '--npm-dir', 'npm'], { cwd: ROOT, stdio: 'inherit' })
  if (moved.status !== 0) throw new Error('napi artifacts failed')
  // napi artifacts also drops a copy of every binary beside the loader, where `files` would ship all of them in
  // the main package: the binaries belong in the platform packages only.
  for (const file of fs.readdirSync(ROOT).filter((f) => /^toolgate\..+\.node$/.test(f))) fs.rmSync(path.join(ROOT, file))
  const pkg = JSON.parse(fs.readFileSync(MANIFEST, 'utf8'))
  pkg.optionalDependencies = optionalDependencies(pkg)
  fs.writeFileSync(MANIFEST, JSON.stringify(pkg, null, 2) + '\n')
}

function verify() {
  const pkg = JSON.parse(fs.readFileSync(MANIFEST, 'utf8'))
  const problems = []
  const wanted = optionalDependencies(pkg)
  for (const [name, version] of Object.entries(wanted)) {
    if (pkg.optionalDependencies?.[name] !== version) problems.push(`${name} is not an optional dependency at ${version}`)
  }
  for (const platform of pkg.napi.targets.map(platformOf)) {
    const dir = path.join(ROOT, 'npm', platform)
    const sub = JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8'))
    if (sub.version !== pkg.version) problems.push(`${sub.name} is at ${sub.version}, the main package at ${pkg.version}`)
    const binary = path.join(dir, sub.main)
    if (!fs.existsSync(binary) || fs.statSync(binary).size < 1024 * 1024) problems.push(`${sub.name} has no binary (${sub.main})`)
  }
  const stray = fs.readdirSync(ROOT).filter((f) => f.endsWith('.node'))
  if (stray.length > 0) problems.push(`the main package would carry ${stray.join(', ')}`)
  if (problems.length > 0) throw new Error(problems.join('\n'))
  return pkg
}

if (require.main === module) {
  const [artifacts] = process.argv.slice(2)
  if (!artifacts) {
    console.error('usage: node scripts/stage-release.js <artifacts-dir> | --verify')
    process.exit(2)
  }
  try {
    if (artifacts !== '--verify') moveArtifacts(path.resolve(artifacts))
    const pkg = verify()
    console.log(`stage-release: ${pkg.napi.targets.length} platform packages hold their binaries at ${pkg.version}`)
  } catch (error) {
    console.error(`stage-release: ${error.message}`)
    process.exit(1)
  }
}

module.exports = { optionalDependencies }
