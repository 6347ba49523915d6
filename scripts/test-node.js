'use strict'
// The Node test suite under each Node release the package supports, one after another: the binaries come from
// the `node` packages in devDependencies (node20, node22, node24), so every machine tests the same three.

const { spawnSync } = require('node:child_process')
const fs = require('node:fs')
const path = require('node:path')

const ROOT = path.resolve(__dirname, '..')
const RELEASES = ['node20', 'node22', 'node24']
const files = fs.readdirSync(path.join(ROOT, '__test__')).filter((f) => f.endsWith('.test.js')).map((f) => path.join('__test__', f))

for (const release of RELEASES) {
  const binary = path.join(ROOT, 'node_modules', release, 'bin', process.platform === 'win32' ? 'node.exe' : 'node')
  if (!fs.existsSync(binary)) {
    console.error(`test-node: ${binary} is missing: run npm install (the ${release} package fetches its binary when it installs)`)
    process.exit(1)
  }
  const version = spawnSync(binary, ['--version'], { encoding: 'utf8' }).stdout.trim()
  console.log(`\n# the Node test suite under Node ${version}`)
  const run = spawnSync(binary, ['--test', '--test-reporter=tap', ...files], { cwd: ROOT, stdio: 'inherit' })
  if (run.status !== 0) {
    console.error(`test-node: the suite failed under Node ${version}`)
    process.exit(run.status ?? 1)
  }
}
