'use strict'
// Type-checks every ```ts block of README.md and the guides in docs/ as written, under `strict`: each block becomes a module of its own in
// a folder of __test__/types/readme/blocks made for the run (not committed; runs side by side do not meet), with
// the names a block uses but does not declare (the executor, the model's messages, a provider client) declared once
// in prelude.d.ts. A block fenced ```ts vitest5 is checked the same way against vitest 5, in __test__/types/vitest5
// (the repository's own suites run on vitest 4, and the two declare their matchers differently). A README edit that
// breaks typing fails `npm test`.

const { spawnSync } = require('node:child_process')
const fs = require('node:fs')
const path = require('node:path')

const ROOT = path.resolve(__dirname, '..')
/** Where each kind of block is checked: its project (a tsconfig the run's extends) and the files it adds. */
const PROJECTS = {
  ts: { dir: path.join(ROOT, '__test__', 'types', 'readme'), files: ['../../prelude.d.ts'] },
  'ts vitest5': { dir: path.join(ROOT, '__test__', 'types', 'vitest5'), files: [] },
}

/** The ```ts blocks of a Markdown text (```ts vitest5 ones too), with the line each starts on and its fence's
 * words; `name` names the file in errors. */
function tsBlocks(markdown, name = 'README.md') {
  const blocks = []
  const lines = markdown.split('\n')
  for (let i = 0; i < lines.length; i++) {
    const fence = lines[i].trim().slice(3)
    if (!lines[i].trim().startsWith('```') || !Object.hasOwn(PROJECTS, fence)) continue
    const start = i + 1
    let end = start
    while (end < lines.length && lines[end].trim() !== '```') end++
    if (end === lines.length) throw new Error(`${name}:${i + 1}: a \`\`\`${fence} block that never closes`)
    blocks.push({ line: start + 1, code: lines.slice(start, end).join('\n'), ...(fence === 'ts' ? {} : { project: fence }) })
    i = end
  }
  return blocks
}

/** The user's manual: README.md and the guides in docs/. */
function manual() {
  const docs = path.join(ROOT, 'docs')
  const guides = fs.existsSync(docs) ? fs.readdirSync(docs).filter((f) => f.endsWith('.md')).sort().map((f) => path.join(docs, f)) : []
  return [path.join(ROOT, 'README.md'), ...guides]
}

/** `node scripts/check-readme.js [file...]`: README.md and docs/*.md unless files are named (the tests name one). */
function main() {
  const files = process.argv.length > 2 ? process.argv.slice(2) : manual()
  const names = files.map((file) => path.relative(ROOT, path.resolve(file)).replace(/^(\.\.\/)+/, ''))
  const perFile = files.map((file, k) => tsBlocks(fs.readFileSync(file, 'utf8'), names[k]))
  const which = files.map((file) => path.basename(file)).join(', ')
  let failed = false
  for (const [kind, project] of Object.entries(PROJECTS)) {
    const mine = perFile.map((blocks) => blocks.filter((block) => (block.project ?? 'ts') === kind))
    const count = mine.reduce((n, blocks) => n + blocks.length, 0)
    if (count === 0) continue
    const { status, out } = compile(project, mine, files)
    const against = kind === 'ts' ? '' : ` against ${kind.slice(3)}`
    if (status !== 0) {
      process.stderr.write(out)
      console.error(`check-readme: the TypeScript examples of ${which}${against} do not type-check (${count} blocks)`)
      failed = true
    } else console.log(`check-readme: ${count} TypeScript blocks of ${which}${against} type-check under strict`)
  }
  if (failed) process.exit(1)
}

/** Compiles each file's blocks as modules in a folder of the project made for the run; tsc's output names each
 * error by its Markdown file and line. */
function compile(project, perFile, files) {
  const blocksDir = path.join(project.dir, 'blocks')
  fs.mkdirSync(blocksDir, { recursive: true })
  const run = fs.mkdtempSync(path.join(blocksDir, 'run-'))
  let tsc
  try {
    perFile.forEach((blocks, k) => {
      for (const { line, code } of blocks) {
        // `export {}` makes every block a module: its own declarations shadow the prelude's, and top-level await works.
        fs.writeFileSync(path.join(run, `f${k}-line-${String(line).padStart(4, '0')}.mts`), `${code}\nexport {}\n`)
      }
    })
    const config = { extends: '../../tsconfig.json', files: project.files, include: ['*.mts'] }
    fs.writeFileSync(path.join(run, 'tsconfig.json'), JSON.stringify(config))
    const bin = path.join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc')
    tsc = spawnSync(process.execPath, [bin, '-p', run], { cwd: ROOT, encoding: 'utf8' })
  } finally {
    fs.rmSync(run, { recursive: true, force: true })
  }
  // tsc names a block by its file: f0-line-0043.mts:5 is line 43 + 5 - 1 of the first Markdown file.
  const out = (tsc.stdout + tsc.stderr).replace(/__test__\/types\/\w+\/blocks\/run-\w+\/f(\d+)-line-0*(\d+)\.mts\((\d+),(\d+)\)/g,
    (_, k, start, row, col) => `${path.basename(files[Number(k)])}:${Number(start) + Number(row) - 1}:${col}`)
  return { status: tsc.status, out }
}

if (require.main === module) main()

module.exports = { tsBlocks, manual }
