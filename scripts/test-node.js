'use strict'
// The Node test suite (`__test__/*.test.js`), under this Node (`node scripts/test-node.js`), or under the Node
// releases the package supports: `node scripts/test-node.js node20 node22 node24`. Their binaries come from the
// `node` packages in devDependencies, so every machine tests the same three. Files run two at a time: most of a
// file's time is spent waiting on timers and child processes.

const { spawnSync } = require('node:child_process')
const fs = require('node:fs')
const path = require('node:path')

const ROOT = path.resolve(__dirname, '..')
const RELEASES = ['node20', 'node22', 'node24']
const files = fs.readdirSync(path.join(ROOT, '__test__')).filter((f) => f.endsWith('.test.js')).map((f) => path.join('__test__', f))

/** The node binary of a release package, or this process's own. */
function binaryOf(release) {
  if (!release) return process.execPath
  if (!RELEASES.includes(release)) {
    console.error(`test-node: no release ${release}; the releases are ${RELEASES.join(', ')}`)
    process.exit(2)
  }
  const binary = path.join(ROOT, 'node_modules', release, 'bin', process.platform === 'win32' ? 'node.exe' : 'node')
  if (!fs.existsSync(binary)) {
    console.error(`test-node: ${binary} is missing: run npm install (the ${release} package fetches its binary when it installs)`)
    process.exit(1)
  }
  return binary
}

const releases = process.argv.slice(2)
for (const release of releases.length ? releases : [undefined]) {
  const binary = binaryOf(release)
  const version = spawnSync(binary, ['--version'], { encoding: 'utf8' }).stdout.trim()
  console.log(`\n# the Node test suite under Node ${version}`)
  const run = spawnSync(binary, ['--test', '--test-concurrency=2', '--test-reporter=tap', ...files], { cwd: ROOT, stdio: 'inherit' })
  if (run.status !== 0) {
    console.error(`test-node: the suite failed under Node ${version}`)
    process.exit(run.status ?? 1)
  }
}
