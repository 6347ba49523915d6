'use strict'
// The package as users install it: scripts/check-package.js passes on the package as it is, and fails when the
// binary is missing, when `files` leaves out a module the entry needs, or when the types do not resolve. Also: the
// per-platform packages agree with package.json, and a platform without a binary gets an error that says so.

const { test } = require('node:test')
const assert = require('node:assert/strict')
const { spawnSync } = require('node:child_process')
const fs = require('node:fs')
const path = require('node:path')
const { checkPackage } = require('../../scripts/check-package.js')
const { optionalDependencies } = require('../../scripts/stage-release.js')
const { platformOf, hostPlatform } = require('../../lib/engine/platform.js')

const ROOT = path.resolve(__dirname, '..', '..')
const pkg = require('../../package.json')

const editJson = (file, edit) => fs.writeFileSync(file, JSON.stringify(edit(JSON.parse(fs.readFileSync(file, 'utf8')))))

test('the packed package installs without Rust and runs from CommonJS, ESM and TypeScript', () => {
  const figures = checkPackage()
  assert.ok(figures.installMs > 0)
  assert.ok(figures.mainTarball.size < 200 * 1024, `the main tarball is ${figures.mainTarball.size} bytes`)
  assert.ok(figures.platformTarball.size > 1024 * 1024, 'the platform tarball carries the binary')
})

test('the check fails when the binary is missing from its package', () => {
  assert.throws(
    () => checkPackage({ mutate: { platform: (dir) => fs.rmSync(path.join(dir, `toolgate.${hostPlatform().name}.node`)) } }),
    (error) => /require\("toolgate"\)/.test(error.message) && /found no native binary that loads/.test(error.message),
  )
})

test('the check fails when files leaves out a module the entry needs', () => {
  assert.throws(
    () => checkPackage({ mutate: { main: (dir) => editJson(path.join(dir, 'package.json'), (p) => ({ ...p, files: p.files.filter((f) => f !== 'lib/') })) } }),
    (error) => /require\("toolgate"\)/.test(error.message) && /lib\/executor\.js/.test(error.message),
  )
})

test('the check fails when a subpath\'s types do not resolve under moduleResolution "node"', () => {
  assert.throws(
    () => checkPackage({ mutate: { main: (dir) => editJson(path.join(dir, 'package.json'), ({ typesVersions, ...p }) => p) } }),
    (error) => /moduleResolution "node"/.test(error.message) && /toolgate\/ai-sdk/.test(error.message),
  )
})

test('the check fails when the types do not resolve', () => {
  assert.throws(
    () => checkPackage({ mutate: { main: (dir) => editJson(path.join(dir, 'package.json'), (p) => ({ ...p, files: p.files.filter((f) => f !== 'index.d.mts') })) } }),
    (error) => /tsc against the published types/.test(error.message) && /esm\.mts/.test(error.message),
  )
})

test('the check fails when the main package does not name its platform packages', () => {
  assert.throws(
    () => checkPackage({ mutate: { main: (dir) => editJson(path.join(dir, 'package.json'), (p) => ({ ...p, optionalDependencies: undefined })) } }),
    (error) => /require\("toolgate"\)/.test(error.message) && /found no native binary that loads/.test(error.message),
  )
})

test('every napi target has its platform package at the main version, named as an optional dependency at release', () => {
  const platforms = pkg.napi.targets.map(platformOf)
  assert.deepEqual(fs.readdirSync(path.join(ROOT, 'npm')).sort(), [...platforms].sort())
  // Committed, they would break `npm ci`: a lockfile cannot hold a package that is not published yet.
  assert.equal(pkg.optionalDependencies, undefined)
  assert.deepEqual(
    Object.entries(optionalDependencies(pkg)).sort(),
    platforms.map((p) => [`${pkg.napi.packageName}-${p}`, pkg.version]).sort(),
  )
  for (const platform of platforms) {
    const sub = require(path.join(ROOT, 'npm', platform, 'package.json'))
    const [os, cpu, abi] = platform.split('-')
    assert.equal(sub.name, `${pkg.napi.packageName}-${platform}`)
    assert.equal(sub.version, pkg.version)
    assert.equal(sub.main, `toolgate.${platform}.node`)
    assert.deepEqual(sub.files, [sub.main])
    assert.deepEqual(sub.os, [os])
    assert.deepEqual(sub.cpu, [cpu])
    if (os === 'linux') assert.deepEqual(sub.libc, [abi === 'musl' ? 'musl' : 'glibc'])
    else assert.equal(sub.libc, undefined)
  }
})

test('a platform without a binary gets an error naming it, the supported list and how to build from source', () => {
  // A process that reports itself as FreeBSD on arm64: no local binary and no package can match.
  const probe = `Object.defineProperty(process, 'platform', { value: 'freebsd' });
    Object.defineProperty(process, 'arch', { value: 'arm64' });
    try { require('./index.js'); console.log('loaded') } catch (e) { console.log(JSON.stringify({ code: e.code, message: e.message, cause: !!e.cause })) }`
  const out = spawnSync(process.execPath, ['-e', probe], { cwd: ROOT, encoding: 'utf8' })
  const error = JSON.parse(out.stdout)
  assert.equal(error.code, 'ERR_TOOLGATE_NO_BINARY')
  assert.ok(error.cause)
  assert.match(error.message, /found no native binary that loads on freebsd-arm64\./)
  assert.match(error.message, /linux-x64-gnu, linux-arm64-gnu, linux-x64-musl, linux-arm64-musl, darwin-x64, darwin-arm64, win32-x64-msvc, win32-arm64-msvc/)
  assert.match(error.message, /This platform is not one of them/)
  assert.match(error.message, /install Rust \(https:\/\/rustup\.rs\).*npm run build/)
  assert.doesNotMatch(error.message, /npm has a bug/)
  // In the order the loader tried them: the local build before the package.
  assert.match(error.message, /in order:\n  - Cannot find module '\.\/toolgate\.freebsd-arm64\.node'/)
})

test('a binary that exists but does not load is named as such, not as missing', () => {
  const dir = fs.mkdtempSync(path.join(require('node:os').tmpdir(), 'toolgate-broken-'))
  try {
    for (const entry of ['package.json', 'index.js', 'binding.js', 'lib']) fs.cpSync(path.join(ROOT, entry), path.join(dir, entry), { recursive: true })
    fs.writeFileSync(path.join(dir, `toolgate.${hostPlatform().name}.node`), 'not an ELF file')
    const probe = "try { require('./index.js') } catch (e) { console.log(JSON.stringify({ code: e.code, message: e.message })) }"
    const { code, message } = JSON.parse(spawnSync(process.execPath, ['-e', probe], { cwd: dir, encoding: 'utf8' }).stdout)
    assert.equal(code, 'ERR_TOOLGATE_NO_BINARY')
    assert.match(message, new RegExp(`found a native binary for ${hostPlatform().name} \\(glibc [0-9.]+\\) but it failed to load: .*toolgate\\.${hostPlatform().name}\\.node`))
    assert.match(message, /Reinstall the package/)
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
})

test('32-bit ARM Linux is named as the loader names it', () => {
  const probe = "Object.defineProperty(process, 'arch', { value: 'arm' }); console.log(require('./lib/engine/platform.js').hostPlatform().name)"
  assert.equal(spawnSync(process.execPath, ['-e', probe], { cwd: ROOT, encoding: 'utf8' }).stdout.trim(), 'linux-arm-gnueabihf')
})

test('a supported platform whose package is missing is told to reinstall the optional dependency', () => {
  const probe = `Object.defineProperty(process, 'arch', { value: 'arm64' });
    try { require('./index.js'); console.log('loaded') } catch (e) { console.log(JSON.stringify({ message: e.message })) }`
  const out = spawnSync(process.execPath, ['-e', probe], { cwd: ROOT, encoding: 'utf8' })
  const { message } = JSON.parse(out.stdout)
  assert.match(message, /on linux-arm64-gnu \(glibc [0-9.]+\)\./)
  assert.match(message, /the optional dependency @toolgate\/binding-linux-arm64-gnu was not installed/)
  assert.match(message, /--omit=optional/)
})

test('the ESM entry exports exactly what the CommonJS entry does, the same objects, and it as the default', async () => {
  const esm = await import(path.join(ROOT, 'index.mjs'))
  const cjs = require('../../index.js')
  assert.deepEqual(Object.keys(esm).filter((k) => k !== 'default').sort(), Object.keys(cjs).sort())
  for (const key of Object.keys(cjs)) assert.equal(esm[key], cjs[key], key)
  assert.equal(esm.default, cjs)
})

test('prepare keeps a fresh local binary, builds a stale or missing one, and without Rust uses the prebuilt package or says what to install', () => {
  const prepare = (cwd, env) => spawnSync(process.execPath, ['scripts/prepare.js'], { cwd, encoding: 'utf8', env: { ...process.env, PATH: '/nonexistent', ...env } })
  const host = hostPlatform().name
  const bare = fs.mkdtempSync(path.join(require('node:os').tmpdir(), 'toolgate-bare-'))
  try {
    // A checkout as a git dependency has it before it builds: sources, no binary.
    for (const entry of ['package.json', 'index.js', 'binding.js', 'lib', 'scripts', 'src', 'build.rs', 'Cargo.toml']) fs.cpSync(path.join(ROOT, entry), path.join(bare, entry), { recursive: true })
    const packing = prepare(bare, { npm_command: 'pack' })
    assert.equal(packing.status, 0, packing.stderr)
    assert.equal(packing.stdout + packing.stderr, '')

    const noRust = prepare(bare, { npm_command: 'install' })
    assert.equal(noRust.status, 1)
    assert.match(noRust.stderr, /needs a Rust toolchain and `cargo` is not on PATH/)
    assert.match(noRust.stderr, /https:\/\/rustup\.rs/)

    // A local binary older than a source is stale: prepare goes to build it (and, without cargo, says so).
    const binary = path.join(bare, `toolgate.${host}.node`)
    fs.copyFileSync(path.join(ROOT, `toolgate.${host}.node`), binary)
    fs.utimesSync(binary, new Date(Date.now() - 60_000), new Date(Date.now() - 60_000))
    const stale = prepare(bare, { npm_command: 'install' })
    assert.equal(stale.status, 1)
    assert.match(stale.stderr, /needs a Rust toolchain/)
    fs.utimesSync(binary, new Date(), new Date())
    const fresh = prepare(bare, { npm_command: 'install' })
    assert.equal(fresh.status, 0, fresh.stderr)
    assert.equal(fresh.stdout + fresh.stderr, '')
    fs.rmSync(binary)

    // Without Rust but with the prebuilt package installed: used, with a warning that it is the release's engine.
    const sub = path.join(bare, 'node_modules', '@toolgate', `binding-${host}`)
    fs.cpSync(path.join(ROOT, 'npm', host), sub, { recursive: true })
    fs.copyFileSync(path.join(ROOT, `toolgate.${host}.node`), path.join(sub, `toolgate.${host}.node`))
    const prebuilt = prepare(bare, { npm_command: 'install' })
    assert.equal(prebuilt.status, 0, prebuilt.stderr)
    assert.match(prebuilt.stderr, /using the prebuilt binary package for .*the engine of the published release/)
  } finally {
    fs.rmSync(bare, { recursive: true, force: true })
  }
})

test('the glibc floor check passes the built binary and fails one that needs a newer glibc', { skip: !hostPlatform().name.endsWith('-gnu') && 'not a Linux gnu host' }, () => {
  const { check, FLOOR } = require('../../scripts/check-glibc.js')
  const binary = path.join(ROOT, `toolgate.${hostPlatform().name}.node`)
  const highest = check(binary)
  assert.ok(highest.split('.').map(Number)[1] <= Number(FLOOR.split('.')[1]), `the binary needs glibc ${highest}`)
  // Node 22's official build asks for glibc 2.28.
  const node22 = path.join(ROOT, 'node_modules', 'node22', 'bin', 'node')
  assert.throws(() => check(node22), /needs glibc 2\.(2[89]|[3-9][0-9]), above the floor of 2\.17 \(GLIBC_2\.2[0-9]: /)
})

test('release staging puts each binary in its platform package only, and fails when one is missing', () => {
  const stageIn = (platforms) => {
    const dir = fs.mkdtempSync(path.join(require('node:os').tmpdir(), 'toolgate-stage-'))
    for (const entry of ['package.json', 'lib', 'scripts', 'npm']) fs.cpSync(path.join(ROOT, entry), path.join(dir, entry), { recursive: true })
    fs.symlinkSync(path.join(ROOT, 'node_modules'), path.join(dir, 'node_modules'))
    fs.mkdirSync(path.join(dir, 'artifacts'))
    const binary = path.join(ROOT, `toolgate.${hostPlatform().name}.node`)
    for (const p of platforms) fs.copyFileSync(binary, path.join(dir, 'artifacts', `toolgate.${p}.node`))
    const run = spawnSync(process.execPath, ['scripts/stage-release.js', 'artifacts'], { cwd: dir, encoding: 'utf8' })
    return { dir, run }
  }
  const platforms = pkg.napi.targets.map(platformOf)
  const full = stageIn(platforms)
  try {
    assert.equal(full.run.status, 0, full.run.stderr)
    for (const p of platforms) assert.ok(fs.existsSync(path.join(full.dir, 'npm', p, `toolgate.${p}.node`)), p)
    assert.deepEqual(fs.readdirSync(full.dir).filter((f) => f.endsWith('.node')), [])
    assert.deepEqual(JSON.parse(fs.readFileSync(path.join(full.dir, 'package.json'), 'utf8')).optionalDependencies, optionalDependencies(pkg))
  } finally {
    fs.rmSync(full.dir, { recursive: true, force: true })
  }
  const short = stageIn(platforms.filter((p) => p !== 'win32-arm64-msvc'))
  try {
    assert.equal(short.run.status, 1)
    // napi artifacts refuses first; the staging check would name the package too.
    assert.match(short.run.stdout + short.run.stderr, /win32-arm64-msvc/)
    assert.match(short.run.stderr, /stage-release: (napi artifacts failed|.*win32-arm64-msvc has no binary)/)
  } finally {
    fs.rmSync(short.dir, { recursive: true, force: true })
  }
})

test('npm run demo runs on the engine the install built: no second build (there is no cargo on its PATH)', () => {
  const bin = fs.mkdtempSync(path.join(require('node:os').tmpdir(), 'toolgate-demo-'))
  try {
    fs.symlinkSync(process.execPath, path.join(bin, 'node'))
    fs.symlinkSync('/bin/sh', path.join(bin, 'sh'))
    const demo = spawnSync('/bin/sh', ['-c', pkg.scripts.demo], { cwd: ROOT, encoding: 'utf8', env: { PATH: bin, HOME: process.env.HOME } })
    assert.equal(demo.status, 0, demo.stderr)
    assert.doesNotMatch(demo.stderr, /cargo|Rust toolchain/)
    assert.match(demo.stdout, /execute\(\) took \d+ ms/, 'the demo ran its turns')
  } finally {
    fs.rmSync(bin, { recursive: true, force: true })
  }
})
