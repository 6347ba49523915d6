'use strict'
// Platforms in napi-rs's naming (`linux-x64-gnu`, `darwin-arm64`, `win32-x64-msvc`): the ones binaries are built for
// (package.json's napi.targets), this process's own, and the error that says which binary was missing and how to
// get one.

const fs = require('node:fs')
const { napi, version } = require('../../package.json')

const ARCH = { x86_64: 'x64', aarch64: 'arm64' }

/** napi-rs's platform name of a Rust target triple: `x86_64-unknown-linux-gnu` → `linux-x64-gnu`. */
function platformOf(triple) {
  const [cpu, , os, abi] = triple.split('-')
  const arch = ARCH[cpu] ?? cpu
  if (os === 'darwin') return `darwin-${arch}`
  if (os === 'windows') return `win32-${arch}-${abi}`
  return `${os}-${arch}-${abi}`
}

/** This process's platform in the same naming, with the C library a Linux binary must match. */
function hostPlatform() {
  const { platform, arch } = process
  if (platform === 'darwin') return { name: `darwin-${arch}`, libc: null }
  if (platform === 'win32') return { name: `win32-${arch}-msvc`, libc: null }
  if (platform !== 'linux') return { name: `${platform}-${arch}`, libc: null }
  const c = libc()
  const abi = arch === 'arm' ? `${c.musl ? 'musl' : 'gnu'}eabihf` : c.musl ? 'musl' : 'gnu'
  return { name: `linux-${arch}-${abi}`, libc: c.label }
}

/** musl or glibc, decided as the generated loader decides: /usr/bin/ldd first, then the process report. */
function libc() {
  try {
    if (fs.readFileSync('/usr/bin/ldd', 'utf8').includes('musl')) return { musl: true, label: 'musl' }
  } catch {}
  const glibc = glibcVersion()
  return glibc ? { musl: false, label: `glibc ${glibc}` } : { musl: true, label: 'musl (no glibc found)' }
}

function glibcVersion() {
  const report = process.report
  const excluded = report?.excludeNetwork
  try {
    // Without sockets the report is cheap; the setting is the process's own, so it is put back.
    if (report) report.excludeNetwork = true
    return report.getReport().header.glibcVersionRuntime ?? null
  } catch {
    return null
  } finally {
    if (report) report.excludeNetwork = excluded
  }
}

/** The first load errors the generated loader collected (its own summary left out), in the order it tried them. */
function loadErrors(error) {
  // Its chain runs newest first: the whole chain is reversed before it is cut, so the first attempts stay.
  const errors = []
  for (let e = error?.cause ?? error; e && errors.length < 64; e = e.cause) errors.push(e)
  return errors.reverse().slice(0, 8)
}

const firstLine = (e) => String(e?.message ?? e).split('\n')[0]

function missingBinaryError(cause) {
  const host = hostPlatform()
  const supported = napi.targets.map(platformOf)
  const listed = supported.includes(host.name)
  const errors = loadErrors(cause)
  // A binary that exists but fails (a glibc too old, a damaged file) is not a missing one.
  const broken = errors.find((e) => e && e.code !== 'MODULE_NOT_FOUND' && !/^Cannot find module/.test(firstLine(e)))
  const libcText = host.libc ? ` (${host.libc})` : ''
  const error = new Error(
    [
      broken
        ? `toolgate ${version} found a native binary for ${host.name}${libcText} but it failed to load: ${firstLine(broken)}`
        : `toolgate ${version} found no native binary that loads on ${host.name}${libcText}.`,
      `It looked for ./toolgate.${host.name}.node (a build from source) and the package ${napi.packageName}-${host.name}.`,
      `Prebuilt binaries exist for: ${supported.join(', ')} (Linux gnu builds need glibc 2.17 or later).`,
      broken
        ? 'Reinstall the package; an error naming GLIBC_ means this system\'s C library is older than the binary needs.'
        : listed
          ? `This platform is one of them, so the optional dependency ${napi.packageName}-${host.name} was not installed: ` +
            'reinstall without --omit=optional / --no-optional, and delete a lockfile made on another platform first.'
          : 'This platform is not one of them.',
      'To build from source: install Rust (https://rustup.rs), then in a clone of toolgate run `npm install && npm run build`.',
      'What the loader tried, in order:',
      ...errors.map((e) => `  - ${firstLine(e)}`),
    ].join('\n'),
  )
  error.code = 'ERR_TOOLGATE_NO_BINARY'
  error.cause = cause
  return error
}

module.exports = { platformOf, hostPlatform, missingBinaryError }
