'use strict'
// The glibc floor: a Linux gnu binary may ask for no symbol version above GLIBC_2.17, so it loads on every glibc
// from 2.17 (CentOS 7, Amazon Linux 2, Debian 8) on. Reads the dynamic symbol table with `objdump -T` and fails
// naming the symbols that need more.
//   node scripts/check-glibc.js [file.node ...]   (default: this checkout's linux gnu binaries)

const { spawnSync } = require('node:child_process')
const fs = require('node:fs')
const path = require('node:path')
const { hostPlatform } = require('../lib/engine/platform.js')

const FLOOR = '2.17'
const ROOT = path.resolve(__dirname, '..')

const newer = (a, b) => {
  const [x, y] = [a, b].map((v) => v.split('.').map(Number))
  for (let i = 0; i < Math.max(x.length, y.length); i++) if ((x[i] ?? 0) !== (y[i] ?? 0)) return (x[i] ?? 0) > (y[i] ?? 0)
  return false
}

/** Every GLIBC_x.y version the file's dynamic symbols require, with the symbols that require it. */
function glibcVersions(file) {
  const dump = spawnSync('objdump', ['-T', file], { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 })
  if (dump.error || dump.status !== 0) throw new Error(`objdump -T ${file} failed: ${dump.error?.message ?? dump.stderr}`)
  const versions = new Map()
  for (const line of dump.stdout.split('\n')) {
    const m = /\bGLIBC_([0-9.]+)\)?\s+(\S+)\s*$/.exec(line)
    if (!m) continue
    if (!versions.has(m[1])) versions.set(m[1], [])
    versions.get(m[1]).push(m[2])
  }
  return versions
}

function check(file) {
  const versions = glibcVersions(file)
  if (versions.size === 0) throw new Error(`${file}: objdump found no GLIBC symbol versions; is it a Linux gnu binary?`)
  const all = [...versions.keys()].sort((a, b) => (newer(a, b) ? 1 : newer(b, a) ? -1 : 0))
  const highest = all[all.length - 1]
  const over = all.filter((v) => newer(v, FLOOR))
  if (over.length > 0) {
    const detail = over.map((v) => `GLIBC_${v}: ${versions.get(v).slice(0, 6).join(', ')}`).join('; ')
    throw new Error(`${file} needs glibc ${highest}, above the floor of ${FLOOR} (${detail})`)
  }
  return highest
}

if (require.main === module) {
  const files = process.argv.slice(2)
  if (files.length === 0 && !hostPlatform().name.endsWith('-gnu')) {
    console.log(`check-glibc: nothing to check on ${hostPlatform().name}`)
    process.exit(0)
  }
  if (files.length === 0) files.push(...fs.readdirSync(ROOT).filter((f) => /^toolgate\.linux-.*-gnu\.node$/.test(f)))
  if (files.length === 0) {
    console.error('check-glibc: no linux gnu binary here: run `npm run build` first, or name the files to check')
    process.exit(1)
  }
  try {
    for (const file of files) console.log(`check-glibc: ${path.basename(file)} needs glibc ${check(path.resolve(ROOT, file))} at most (floor ${FLOOR})`)
  } catch (error) {
    console.error(`check-glibc: ${error.message}`)
    process.exit(1)
  }
}

module.exports = { check, glibcVersions, FLOOR }
