'use strict'
// Platforms in napi-rs's naming (`linux-x64-gnu`, `darwin-arm64`, `win32-x64-msvc`): the ones binaries are built for
// (package.json's napi.targets), this process's own, and the error that says which binary was missing and how to
// get one.

const { napi, version } = require('../package.json')

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
  const glibc = glibcVersion()
  return glibc
    ? { name: `linux-${arch}-gnu`, libc: `glibc ${glibc}` }
    : { name: `linux-${arch}-musl`, libc: 'musl (no glibc found)' }
}

function glibcVersion() {
  try {
    return process.report.getReport().header.glibcVersionRuntime ?? null
  } catch {
    return null
  }
}

/** The chain of load errors the generated loader collected, one line each (its own summary left out). */
function causes(error) {
  const lines = []
  for (let e = error?.cause ?? error; e && lines.length < 8; e = e.cause) lines.push(`  - ${String(e.message ?? e).split('\n')[0]}`)
  return lines.join('\n')
}

function missingBinaryError(cause) {
  const host = hostPlatform()
  const supported = napi.targets.map(platformOf)
  const listed = supported.includes(host.name)
  const error = new Error(
    [
      `toolgate ${version} found no native binary that loads on ${host.name}` + (host.libc ? ` (${host.libc}).` : '.'),
      `It looked for ./toolgate.${host.name}.node (a build from source) and the package ${napi.packageName}-${host.name}.`,
      `Prebuilt binaries exist for: ${supported.join(', ')} (Linux gnu builds need glibc 2.17 or later).`,
      listed
        ? `This platform is one of them, so the optional dependency ${napi.packageName}-${host.name} was not installed or did not load: ` +
          'reinstall without --omit=optional / --no-optional, and delete a lockfile made on another platform first.'
        : 'This platform is not one of them.',
      'To build from source: install Rust (https://rustup.rs), then in a clone of toolgate run `npm install && npm run build`.',
      'What the loader tried:',
      causes(cause),
    ].join('\n'),
  )
  error.code = 'ERR_TOOLGATE_NO_BINARY'
  error.cause = cause
  return error
}

module.exports = { platformOf, hostPlatform, missingBinaryError }
