'use strict'
// The packaging check: packs toolgate as a release publishes it (the main package without a binary, with its
// optionalDependencies, and this platform's binary package), serves the binary packages from a registry on
// loopback, installs the main tarball into a fresh project the way a user's machine would (npm picks the platform
// package from the optional dependencies; no `cargo` or `rustc` on PATH, `--ignore-scripts`), then requires it,
// imports it, runs a turn and type-checks a CommonJS and an ESM TypeScript file against the published types.
//   node scripts/check-package.js     prints the sizes and the install time; exits 1 on a failure
// `checkPackage({ mutate })` lets a test break one part (the binary, `files`, the types) and see the check fail.

const { spawnSync } = require('node:child_process')
const { Worker } = require('node:worker_threads')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { hostPlatform } = require('../lib/engine/platform.js')
const { optionalDependencies } = require('./stage-release.js')

const ROOT = path.resolve(__dirname, '..')
const TSC = path.join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc')

/** npm's own entry script, run with this Node so that the stripped PATH below needs nothing but `node`. */
function npmCli() {
  if (process.env.npm_execpath && process.env.npm_execpath.endsWith('.js')) return process.env.npm_execpath
  const which = spawnSync('sh', ['-c', 'command -v npm'], { encoding: 'utf8' }).stdout.trim()
  if (!which) throw new Error('npm is not on PATH')
  return path.join(path.dirname(fs.realpathSync(which)), 'npm-cli.js')
}

const RUST_TOOLS = ['cargo', 'rustc', 'rustup']

/** A PATH of one folder holding only `node` and `sh`: no Rust tool can be found, wherever it is installed. */
function rustlessPath(binDir) {
  fs.mkdirSync(binDir, { recursive: true })
  fs.symlinkSync(process.execPath, path.join(binDir, 'node'))
  fs.symlinkSync('/bin/sh', path.join(binDir, 'sh'))
  return binDir
}

/**
 * A registry on loopback that knows only the given tarballs' packages (every other name is a 404, as for a platform
 * package not published yet). It runs in a worker so that it answers while this thread waits on npm.
 */
function startRegistry(tarballs) {
  const ready = new Int32Array(new SharedArrayBuffer(4))
  const worker = new Worker(
    `const http = require('node:http'); const fs = require('node:fs'); const crypto = require('node:crypto')
    const { workerData: { tarballs, ready } } = require('node:worker_threads')
    const server = http.createServer((req, res) => {
      const name = decodeURIComponent(req.url.slice(1))
      const byName = tarballs.find((t) => t.name === name)
      const byFile = tarballs.find((t) => req.url === '/-/' + require('node:path').basename(t.file))
      if (byFile) return res.end(fs.readFileSync(byFile.file))
      if (!byName) { res.statusCode = 404; return res.end('{"error":"not found"}') }
      const data = fs.readFileSync(byName.file)
      const integrity = 'sha512-' + crypto.createHash('sha512').update(data).digest('base64')
      const url = 'http://127.0.0.1:' + server.address().port + '/-/' + require('node:path').basename(byName.file)
      const version = { ...byName.manifest, dist: { tarball: url, integrity } }
      res.setHeader('content-type', 'application/json')
      res.end(JSON.stringify({ name, 'dist-tags': { latest: version.version }, versions: { [version.version]: version } }))
    })
    server.listen(0, '127.0.0.1', () => { Atomics.store(ready, 0, server.address().port); Atomics.notify(ready, 0) })`,
    { eval: true, workerData: { tarballs, ready } },
  )
  Atomics.wait(ready, 0, 0, 10_000)
  const port = Atomics.load(ready, 0)
  if (!port) throw new Error('the loopback registry did not start')
  return { url: `http://127.0.0.1:${port}/`, stop: () => worker.terminate() }
}

function run(command, args, options) {
  const out = spawnSync(command, args, { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024, ...options })
  if (out.error) throw out.error
  return out
}

function must(out, what) {
  if (out.status !== 0) throw new Error(`${what} failed (exit ${out.status}):\n${(out.stderr || out.stdout).trim()}`)
  return out.stdout
}

function npm(args, cwd, env) {
  return run(process.execPath, [npmCli(), ...args, '--no-audit', '--no-fund', '--loglevel=error'], { cwd, env })
}

function pack(dir, dest, env) {
  const [info] = JSON.parse(must(npm(['pack', '--ignore-scripts', '--json', '--pack-destination', dest], dir, env), `npm pack in ${dir}`))
  return { file: path.join(dest, info.filename), size: info.size, unpackedSize: info.unpackedSize, files: info.files.map((f) => f.path) }
}

const CJS_TURN = `
const toolgate = require('toolgate')
const gate = new toolgate.ToolExecutor()
gate.register({ name: 'add', readOnly: true,
  parameters: { type: 'object', properties: { a: { type: 'number' }, b: { type: 'number' } }, required: ['a', 'b'] },
  handler: async ({ a, b }) => a + b })
gate.execute([{ id: 'c1', name: 'add', arguments: '{"a":2,"b":3}' }, { id: 'c2', name: 'nope', arguments: '{}' }])
  .then(async (results) => { console.log(JSON.stringify(results.map((r) => [r.success, r.errorKind ?? r.output]))); await gate.close() })
`

const ESM_TURN = `
import { createRequire } from 'node:module'
import toolgate, { ToolExecutor, formatResults, ERROR_KINDS } from 'toolgate'
const gate = new ToolExecutor()
gate.register({ name: 'echo', readOnly: true, parameters: { type: 'object', properties: { s: { type: 'string' } } },
  handler: async ({ s }) => s })
const results = await gate.execute([{ id: 'c1', name: 'echo', arguments: '{"s":"hi"}' }])
await gate.close()
const same = createRequire(import.meta.url)('toolgate').ToolExecutor === ToolExecutor && toolgate.ToolExecutor === ToolExecutor
console.log(JSON.stringify([results[0].success, results[0].output, typeof formatResults, ERROR_KINDS.length > 0, same]))
`

const TS_BODY = `
const gate = new ToolExecutor({ defaultTimeoutMs: 1_000 })
gate.register({
  name: 'add',
  readOnly: true,
  parameters: { type: 'object', properties: { a: { type: 'number' } }, required: ['a'] },
  handler: async ({ a }: { a: number }) => a + 1,
})
export async function turn(): Promise<string> {
  const results: ToolResult[] = await gate.execute([{ id: 'c1', name: 'add', arguments: '{"a":1}' }])
  const kind: ErrorKind | undefined = results[0].success ? undefined : results[0].errorKind
  // @ts-expect-error the types are real: a ToolResult has no such field
  results[0].notAField
  return String(kind)
}
`

/** Every subpath, as a project on the older resolution (`moduleResolution: "node"`, which reads no `exports`) imports
 * it: `typesVersions` points it at its types. */
const NODE10_TS = `import { ToolExecutor } from 'toolgate'
import { aiSdkTools } from 'toolgate/ai-sdk'
import { openAiAgentsTools } from 'toolgate/openai-agents'
import { langchainTools } from 'toolgate/langchain'
import { mountMcp } from 'toolgate/mcp'
import { redisStore } from 'toolgate/redis'
import { manualClock } from 'toolgate/testing'
const gate: ToolExecutor = new ToolExecutor({ clock: manualClock() })
export const subpaths = [aiSdkTools, openAiAgentsTools, langchainTools, mountMcp, redisStore, gate]
// @ts-expect-error a subpath the package does not have
import('toolgate/nothing')
`

const TS_FILES = {
  'esm.mts': `import toolgate, { ToolExecutor, type ToolResult, type ErrorKind } from 'toolgate'\nexport const same: typeof ToolExecutor = toolgate.ToolExecutor\n${TS_BODY}`,
  'cjs.cts': `import toolgate = require('toolgate')\nimport { ToolExecutor } from 'toolgate'\ntype ToolResult = toolgate.ToolResult\ntype ErrorKind = toolgate.ErrorKind\n${TS_BODY}`,
}

/**
 * Packs, installs and exercises the package in a temp folder; returns the figures or throws what failed.
 * `mutate.main(dir)` and `mutate.platform(dir)` may change the staged packages before they are packed.
 */
function checkPackage({ mutate = {}, keep = false } = {}) {
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'toolgate-package-'))
  try {
    const env = { ...process.env, PATH: rustlessPath(path.join(work, 'bin')), npm_config_cache: path.join(work, 'npm-cache') }
    for (const key of Object.keys(env)) if (key.startsWith('npm_') && key !== 'npm_config_cache') delete env[key]
    if (env.PATH.split(path.delimiter).some((dir) => RUST_TOOLS.some((tool) => fs.existsSync(path.join(dir, tool))))) throw new Error('a Rust tool is still on the stripped PATH')
    const host = hostPlatform().name
    const binary = `toolgate.${host}.node`

    // The main package, as a release stages it: what `files` selects, without a binary, with its optional
    // dependencies written.
    const listed = JSON.parse(must(npm(['pack', '--dry-run', '--json', '--ignore-scripts'], ROOT, env), 'npm pack --dry-run'))[0].files
    const main = path.join(work, 'stage', 'main')
    for (const { path: file } of listed) {
      if (file.endsWith('.node')) continue
      fs.mkdirSync(path.dirname(path.join(main, file)), { recursive: true })
      fs.copyFileSync(path.join(ROOT, file), path.join(main, file))
    }
    const manifest = JSON.parse(fs.readFileSync(path.join(main, 'package.json'), 'utf8'))
    manifest.optionalDependencies = optionalDependencies(manifest)
    fs.writeFileSync(path.join(main, 'package.json'), JSON.stringify(manifest, null, 2))
    mutate.main?.(main)

    // This platform's binary package, as `napi artifacts` fills it.
    const platform = path.join(work, 'stage', host)
    fs.cpSync(path.join(ROOT, 'npm', host), platform, { recursive: true })
    if (!fs.existsSync(path.join(ROOT, binary))) throw new Error(`${binary} is missing: run npm run build first`)
    fs.copyFileSync(path.join(ROOT, binary), path.join(platform, binary))
    mutate.platform?.(platform)

    const dest = path.join(work, 'tarballs')
    fs.mkdirSync(dest)
    const mainTarball = pack(main, dest, env)
    const platformTarball = pack(platform, dest, env)

    const project = path.join(work, 'project')
    fs.mkdirSync(project)
    fs.writeFileSync(path.join(project, 'package.json'), JSON.stringify({ name: 'consumer', version: '1.0.0', private: true }))
    const platformManifest = JSON.parse(fs.readFileSync(path.join(platform, 'package.json'), 'utf8'))
    const registry = startRegistry([{ name: platformManifest.name, file: platformTarball.file, manifest: platformManifest }])
    let installMs
    try {
      const started = process.hrtime.bigint()
      must(npm(['install', '--ignore-scripts', `--registry=${registry.url}`, mainTarball.file], project, env), 'npm install of the main tarball')
      installMs = Number(process.hrtime.bigint() - started) / 1e6
    } finally {
      registry.stop()
    }

    const cjs = must(run(process.execPath, ['-e', CJS_TURN], { cwd: project, env }), 'require("toolgate") and a turn').trim()
    if (cjs !== '[[true,"5"],[false,"unknown_tool"]]') throw new Error(`the CommonJS turn returned ${cjs}`)
    const esm = must(run(process.execPath, ['--input-type=module', '-e', ESM_TURN], { cwd: project, env }), 'import "toolgate" and a turn').trim()
    if (esm !== '[true,"hi","function",true,true]') throw new Error(`the ESM turn returned ${esm}`)

    for (const [file, text] of Object.entries(TS_FILES)) fs.writeFileSync(path.join(project, file), text)
    const tsconfig = {
      compilerOptions: {
        module: 'nodenext',
        moduleResolution: 'nodenext',
        target: 'es2022',
        strict: true,
        noEmit: true,
        skipLibCheck: false,
        typeRoots: [path.join(ROOT, 'node_modules', '@types')],
        types: ['node'],
      },
      files: Object.keys(TS_FILES),
    }
    fs.writeFileSync(path.join(project, 'tsconfig.json'), JSON.stringify(tsconfig))
    must(run(process.execPath, [TSC, '-p', project], { cwd: project, env }), 'tsc against the published types')
    // The frameworks are not installed here: their types are the project's own to bring (skipLibCheck, as such
    // projects run); what is checked is that every subpath of toolgate resolves.
    fs.mkdirSync(path.join(project, 'node10'))
    fs.writeFileSync(path.join(project, 'node10', 'subpaths.ts'), NODE10_TS)
    const node10 = { compilerOptions: { ...tsconfig.compilerOptions, module: 'commonjs', moduleResolution: 'node', skipLibCheck: true }, files: ['subpaths.ts'] }
    fs.writeFileSync(path.join(project, 'node10', 'tsconfig.json'), JSON.stringify(node10))
    must(run(process.execPath, [TSC, '-p', path.join(project, 'node10')], { cwd: project, env }), 'tsc with moduleResolution "node" against every subpath')

    return {
      mainTarball: { size: mainTarball.size, unpackedSize: mainTarball.unpackedSize, files: mainTarball.files.length },
      platformTarball: { size: platformTarball.size, unpackedSize: platformTarball.unpackedSize },
      binaryBytes: fs.statSync(path.join(ROOT, binary)).size,
      installMs,
      work: keep ? work : undefined,
    }
  } finally {
    if (!keep) fs.rmSync(work, { recursive: true, force: true })
  }
}

if (require.main === module) {
  try {
    const f = checkPackage()
    const mb = (n) => `${(n / 1e6).toFixed(2)} MB`
    console.log(`check-package: main tarball ${(f.mainTarball.size / 1e3).toFixed(1)} kB (${f.mainTarball.files} files, ${(f.mainTarball.unpackedSize / 1e3).toFixed(1)} kB unpacked)`)
    console.log(`check-package: ${hostPlatform().name} tarball ${mb(f.platformTarball.size)}, binary ${mb(f.binaryBytes)}`)
    console.log(`check-package: installed in ${Math.round(f.installMs)} ms without cargo or rustc; require, import, a turn each and tsc passed`)
  } catch (error) {
    console.error(`check-package: ${error.message}`)
    process.exit(1)
  }
}

module.exports = { checkPackage }
