'use strict'
// `npm run build`: writes both sides of the wire from its declaration (scripts/gen-wire.js), builds the native addon
// from source for this machine and regenerates the loader (binding.js) and its types (binding.d.ts). On a Linux x64 glibc host it links against napi-rs's prebuilt gcc toolchain (a glibc 2.17
// sysroot, fetched once from the npm registry into ~/.napi-rs), so the binary loads on any glibc from 2.17 on, not
// only on this host's; scripts/check-glibc.js holds it to that. Extra arguments go to `napi build`: `--target
// <triple>` builds for another target, with `--use-napi-cross` for a Linux gnu one (the release workflow).

const { spawnSync } = require('node:child_process')
const os = require('node:os')
const path = require('node:path')
const { hostPlatform, platformOf } = require('../lib/engine/platform.js')

const ROOT = path.resolve(__dirname, '..')
const extra = process.argv.slice(2)
const HOST = hostPlatform().name

if (spawnSync('cargo', ['--version'], { stdio: 'ignore' }).error) {
  console.error(
    'toolgate: building from source needs a Rust toolchain and `cargo` is not on PATH. Install Rust from ' +
      'https://rustup.rs and run `npm run build` again, or install the published package (`npm install toolgate`), ' +
      'which carries prebuilt binaries.',
  )
  process.exit(1)
}

const wire = spawnSync(process.execPath, [path.join(__dirname, 'gen-wire.js')], { cwd: ROOT, stdio: 'inherit' })
if (wire.status !== 0) process.exit(wire.status ?? 1)

const args = ['build', '--platform', '--release', '--js', 'binding.js', '--dts', 'binding.d.ts', ...extra]
// mimalloc's C stamps __DATE__/__TIME__ into the binary; the compilers take them from SOURCE_DATE_EPOCH, fixed so
// that the same source builds the same bytes wherever and whenever it is built.
const env = { SOURCE_DATE_EPOCH: '0', ...process.env }
const explicit = extra.indexOf('--target')
const target = explicit >= 0 ? extra[explicit + 1] : HOST === 'linux-x64-gnu' ? 'x86_64-unknown-linux-gnu' : null
if (explicit < 0 && target) args.push('--use-napi-cross')
if (args.includes('--use-napi-cross')) Object.assign(env, modernCCompiler(target))

const napi = path.join(ROOT, 'node_modules', '@napi-rs', 'cli', 'dist', 'cli.js')
const run = spawnSync(process.execPath, [napi, ...args], { cwd: ROOT, env, stdio: 'inherit' })
process.exit(run.status ?? 1)

/**
 * The toolchain's gcc is 4.8, older than the C that mimalloc is written in (C11 atomics, -Wdate-time), so the C
 * parts are compiled by a current compiler against the toolchain's glibc 2.17 headers; the toolchain still links,
 * against its glibc 2.17 libraries. For this machine's own target that is its gcc; for another, clang (napi adds
 * the sysroot flags for clang). A compiler the caller chose (TARGET_CC) is left alone.
 */
function modernCCompiler(triple) {
  if (process.env.TARGET_CC) return {}
  const which = (cc) => spawnSync('sh', ['-c', `command -v ${cc}`], { encoding: 'utf8' }).stdout.trim()
  if (platformOf(triple) !== HOST) return which('clang') ? { TARGET_CC: which('clang') } : {}
  const compiler = which('gcc') || which('clang')
  if (!compiler) return {}
  const { version } = require('@napi-rs/cross-toolchain/package.json')
  const sysroot = path.join(os.homedir(), '.napi-rs', 'cross-toolchain', version, triple, triple, 'sysroot')
  return { TARGET_CC: compiler, TARGET_CFLAGS: `--sysroot=${sysroot}` }
}
