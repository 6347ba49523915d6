'use strict'
// `npm test`: every test CI runs. The engine is built first when a Rust source is newer than the local binary
// (scripts/built.js); then the parts run side by side, at most JOBS at a time, each part's commands one after
// another. A part's output is printed whole when it ends, so that parts do not interleave; a summary of every
// part's time and outcome comes last, and the exit status is non-zero when any part failed.
// `node scripts/test.js <part>...` runs only the parts named (`npm run test:<part>` runs one).

const { spawn, spawnSync } = require('node:child_process')
const os = require('node:os')
const path = require('node:path')
const { isBuilt } = require('./built.js')

const ROOT = path.resolve(__dirname, '..')
const node = (...args) => [process.execPath, ...args]
/** A dev dependency's command, run by this node from its own script: no shell, the same on every platform. */
const bin = (pkg) => {
  const { bin: entries } = require(path.join(ROOT, 'node_modules', pkg, 'package.json'))
  return node(path.join(ROOT, 'node_modules', pkg, typeof entries === 'string' ? entries : entries[pkg === 'typescript' ? 'tsc' : pkg]))
}

/** Each part: the commands it runs, in order. */
const PARTS = {
  node20: [node('scripts/test-node.js', 'node20')],
  node22: [node('scripts/test-node.js', 'node22')],
  node24: [node('scripts/test-node.js', 'node24')],
  rust: [node('scripts/gen-wire.js', '--check'), ['cargo', 'test', '--workspace'], node('scripts/check-core-imports.js')],
  runners: [
    [...bin('vitest'), 'run', '--root', 'examples/vitest'],
    [...bin('vitest'), 'run', '--root', 'examples/vitest', '--config', 'vitest.forks.config.mjs'],
    [...bin('ava'), '--config', 'examples/ava/ava.config.mjs'],
  ],
  types: [[...bin('typescript'), '-p', '__test__/types'], [...bin('typescript'), '-p', '__test__/types/lib'], [...bin('typescript'), '-p', '__test__/types/providers'], node('scripts/check-readme.js'), node('scripts/check-links.js')],
  package: [node('scripts/check-glibc.js'), node('scripts/lint-workflows.js'), node('--test', '__test__/package/')],
  browser: [node('--test', '--test-concurrency=1', '__test__/browser/')],
  node: [node('scripts/test-node.js')],
}
/** What `npm test` runs, longest first: every part but `node`, the suite under this Node alone (`npm run test:node`). */
const ALL = ['rust', 'node20', 'node22', 'node24', 'types', 'package', 'runners', 'browser']
/** Parts at a time: one more than the cores, since the parts spend much of their time waiting. */
const JOBS = os.availableParallelism() + 1

const names = process.argv.slice(2)
for (const name of names) {
  if (!PARTS[name]) {
    console.error(`test: no part named ${name}; the parts are ${Object.keys(PARTS).join(', ')}`)
    process.exit(2)
  }
}

if (!isBuilt()) {
  const build = spawnSync(process.execPath, [path.join(__dirname, 'build.js')], { cwd: ROOT, stdio: 'inherit' })
  if (build.status !== 0) process.exit(build.status ?? 1)
}

/** A command as the output shows it: paths inside the repository relative to it, the node binary by its name. */
function shown(command, args) {
  const short = (arg) => (path.isAbsolute(arg) ? (arg.startsWith(ROOT) ? path.relative(ROOT, arg) : path.basename(arg)) : arg)
  return [command, ...args].map(short).join(' ')
}

/** Runs a part's commands one after another; resolves with its output, whether it passed and how long it took. */
async function runPart(name) {
  const started = Date.now()
  let output = ''
  for (const [command, ...args] of PARTS[name]) {
    output += `\n$ ${shown(command, args)}\n`
    const status = await new Promise((resolve) => {
      const child = spawn(command, args, { cwd: ROOT, env: { ...process.env, FORCE_COLOR: '0' } })
      for (const stream of [child.stdout, child.stderr]) {
        stream.setEncoding('utf8')
        stream.on('data', (chunk) => (output += chunk))
      }
      child.on('error', (error) => resolve(`not started (${error.message})`))
      child.on('close', (code, signal) => resolve(signal ? `killed by ${signal}` : code))
    })
    if (status !== 0) return { name, output, passed: false, ms: Date.now() - started, why: `${shown(command, args)}: ${typeof status === 'number' ? `exited with ${status}` : status}` }
  }
  return { name, output, passed: true, ms: Date.now() - started }
}

async function main() {
  const queue = names.length ? [...names] : [...ALL]
  // One part alone prints as it runs.
  if (queue.length === 1) {
    for (const [command, ...args] of PARTS[queue[0]]) {
      const run = spawnSync(command, args, { cwd: ROOT, stdio: 'inherit' })
      if (run.error) console.error(`test: ${shown(command, args)} was not started (${run.error.message})`)
      else if (run.signal) console.error(`test: ${shown(command, args)} was killed by ${run.signal}`)
      if (run.status !== 0) {
        process.exitCode = run.status || 1
        return
      }
    }
    return
  }
  const results = []
  const worker = async () => {
    for (let name = queue.shift(); name; name = queue.shift()) {
      const result = await runPart(name)
      process.stdout.write(`\n# ${name}: ${result.passed ? 'passed' : 'FAILED'} in ${(result.ms / 1000).toFixed(1)} s${result.output}`)
      results.push(result)
    }
  }
  const started = Date.now()
  await Promise.all(Array.from({ length: JOBS }, worker))
  console.log(`\n# npm test: ${((Date.now() - started) / 1000).toFixed(1)} s`)
  for (const r of results) console.log(`#   ${r.name.padEnd(8)} ${r.passed ? 'passed' : 'FAILED'} ${(r.ms / 1000).toFixed(1)} s${r.why ? ` (${r.why})` : ''}`)
  // Not process.exit: output still queued for a pipe would be lost.
  if (results.some((r) => !r.passed)) process.exitCode = 1
}

main()
