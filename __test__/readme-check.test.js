'use strict'
// scripts/check-readme.js, which type-checks the README's examples in `npm test`: it finds every ```ts block, and a
// block that does not type-check fails it, named by its line in the Markdown file.

const { describe, it, after } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { spawnSync } = require('node:child_process')
const { tsBlocks } = require('../scripts/check-readme.js')

const SCRIPT = path.join(__dirname, '..', 'scripts', 'check-readme.js')
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'toolgate-readme-'))
after(() => fs.rmSync(dir, { recursive: true, force: true }))

function check(markdown) {
  const file = path.join(dir, 'DOC.md')
  fs.writeFileSync(file, markdown)
  return spawnSync(process.execPath, [SCRIPT, file], { encoding: 'utf8' })
}

describe('check-readme', () => {
  it('finds the ts blocks and the line each starts on, and refuses one that never closes', () => {
    const blocks = tsBlocks('# t\n\n```ts\nconst a = 1\n```\n\n```sh\nnpm test\n```\n```ts\nconst b = 2\n```\n')
    assert.deepEqual(blocks, [{ line: 4, code: 'const a = 1' }, { line: 11, code: 'const b = 2' }])
    assert.throws(() => tsBlocks('x\n```ts\nconst a = 1\n', 'DOC.md'), /^Error: DOC\.md:2: a ```ts block that never closes$/)
  })

  it('passes examples that type-check and fails one that does not, at its line', () => {
    const good = check('```ts\nimport { z } from \'zod\'\ngate.register({ name: \'t\', parameters: z.object({ n: z.number() }), handler: ({ n }) => n + 1 })\n```\n')
    assert.equal(good.status, 0, good.stderr)
    assert.match(good.stdout, /1 TypeScript blocks of DOC\.md type-check/)
    const bad = check('Intro.\n\n```ts\ngate.register({\n  name: \'t\',\n  parameters: { type: \'objekt\' },\n  handler: () => 1,\n})\n```\n')
    assert.equal(bad.status, 1)
    assert.match(bad.stderr, /DOC\.md:6:\d+: error TS/)
  })
})

describe('check-readme against vitest 5', () => {
  const block = (declaration) => [
    '```ts vitest5',
    "import { expect, test } from 'vitest'",
    "import { toolgateMatchers, type ToolgateMatchers } from 'toolgate/testing'",
    'expect.extend(toolgateMatchers)',
    "declare module 'vitest' {",
    `  ${declaration}`,
    '}',
    "test('t', () => { expect({}).toSucceed() })",
    '```',
    '',
  ].join('\n')

  it("checks a block fenced ts vitest5 against vitest 5's declarations, and fails vitest 4's form there at its line", () => {
    const good = check(block('interface Matchers<R extends void | Promise<void> = void | Promise<void>, T = unknown> extends ToolgateMatchers<R> {}'))
    assert.equal(good.status, 0, good.stderr)
    assert.match(good.stdout, /1 TypeScript blocks of DOC\.md against vitest5 type-check/)
    const bad = check(`Intro.\n\n${block('interface Assertion<T> extends ToolgateMatchers<T> {}')}`)
    assert.equal(bad.status, 1)
    assert.match(bad.stderr, /DOC\.md:8:\d+: error TS2428/)
  })
})

describe('check-links', () => {
  const LINKS = path.join(__dirname, '..', 'scripts', 'check-links.js')
  const links = (files) => {
    for (const [name, text] of Object.entries(files)) fs.writeFileSync(path.join(dir, name), text)
    return spawnSync(process.execPath, [LINKS, ...Object.keys(files).map((name) => path.join(dir, name))], { encoding: 'utf8' })
  }

  it('passes links to files and headings that exist, as GitHub anchors them', () => {
    const ok = links({
      'A.md': '# A\n\nSee [the call](B.md#executecalls--signal-context-), [twice](B.md#errors-1), [here](#a), [a site](https://example.com/x).\n\n```ts\n[not](a-link.md)\n```\n',
      'B.md': '# B\n\n### `execute(calls, { signal?, context? })`\n\n## Errors\n\n## Errors\n',
    })
    assert.equal(ok.status, 0, ok.stderr)
  })

  it('fails a link to a missing file or a missing heading, naming its line', () => {
    const bad = links({ 'C.md': '# C\n\n[gone](nowhere.md)\n[no such part](C.md#nothing-here)\n' })
    assert.equal(bad.status, 1)
    assert.match(bad.stderr, /C\.md:3: nowhere\.md: no such file/)
    assert.match(bad.stderr, /C\.md:4: C\.md#nothing-here: .*C\.md has no heading with the anchor #nothing-here/)
  })
})
