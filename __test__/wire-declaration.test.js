'use strict'
// The wire between the JS layer and the engine is declared once (crates/core/wire.json) and both sides are generated
// from it (scripts/gen-wire.js): the committed files are what it declares, a change to it leaves them stale until
// they are generated again (and `npm test` says so), and the two sides read and write each record in one order.

const { describe, it } = require('node:test')
const assert = require('node:assert/strict')
const { spawnSync } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { generate } = require('../scripts/gen-wire.js')
const wire = require('../lib/engine/wire.generated.js')
const { redisStore } = require('../lib/stores/redis.js')

const ROOT = path.resolve(__dirname, '..')
const DECLARATION = path.join(ROOT, 'crates/core/wire.json')
const GEN = path.join(ROOT, 'scripts/gen-wire.js')
const declared = () => JSON.parse(fs.readFileSync(DECLARATION, 'utf8'))
const genWire = (...args) => spawnSync(process.execPath, [GEN, ...args], { cwd: ROOT, encoding: 'utf8' })

/** A declaration changed by `edit`, in a folder of its own. */
function editedDeclaration(edit) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'toolgate-wire-'))
  const declaration = declared()
  edit(declaration)
  const file = path.join(dir, 'wire.json')
  fs.writeFileSync(file, JSON.stringify(declaration))
  return { dir, file }
}

describe('the wire declaration', () => {
  it('the committed generated files are what it declares', () => {
    for (const [file, text] of generate(declared())) assert.equal(fs.readFileSync(path.join(ROOT, file), 'utf8'), text, `${file} is stale`)
    const check = genWire('--check')
    assert.equal(check.status, 0, check.stderr)
  })

  it('a field renamed in it is one edit: the check fails until both sides are generated again, then reads the new name', () => {
    const { dir, file } = editedDeclaration((d) => {
      d.records.Start.fields.find((f) => f.name === 'callId').name = 'toolCallId'
    })
    try {
      // The JS layer as it is, to be type-checked against the new declaration.
      fs.cpSync(path.join(ROOT, 'lib'), path.join(dir, 'lib'), { recursive: true })
      for (const entry of ['index.js', 'index.d.ts', 'package.json']) fs.copyFileSync(path.join(ROOT, entry), path.join(dir, entry))
      const tsconfig = JSON.parse(fs.readFileSync(path.join(ROOT, '__test__/types/lib/tsconfig.json'), 'utf8'))
      tsconfig.compilerOptions.typeRoots = [path.join(ROOT, 'node_modules/@types')]
      tsconfig.include = ['index.js', 'lib/**/*.js']
      fs.writeFileSync(path.join(dir, 'tsconfig.json'), JSON.stringify(tsconfig))

      const stale = genWire('--check', '--declaration', file)
      assert.equal(stale.status, 1)
      assert.match(stale.stderr, /stale.*crates\/core\/src\/generated\/engine\.rs.*lib\/engine\/wire\.generated\.js/s)
      assert.match(stale.stderr, /npm run build/)

      const written = genWire('--declaration', file, '--root', dir)
      assert.equal(written.status, 0, written.stderr)
      const rust = fs.readFileSync(path.join(dir, 'crates/core/src/generated/engine.rs'), 'utf8')
      assert.match(rust, /pub tool_call_id: String,/)
      assert.match(rust, /t\.serialize_element\(&self\.tool_call_id\)\?;/)
      const js = require(path.join(dir, 'lib/engine/wire.generated.js'))
      assert.deepEqual(js.readStart([1, 2, 'c1', 'search', {}, 1, 0]), { run: 1, turn: 2, toolCallId: 'c1', name: 'search', args: {}, attempt: 1, index: 0 })
      assert.match(fs.readFileSync(path.join(dir, 'lib/engine/wire.generated.d.ts'), 'utf8'), /toolCallId: string/)
      assert.equal(genWire('--check', '--declaration', file, '--root', dir).status, 0, 'fresh once generated')
      // The JS that still reads the old name is found by the type check in `npm test` (the Rust, by the compiler).
      const tsc = spawnSync(process.execPath, [path.join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', dir], { encoding: 'utf8' })
      assert.equal(tsc.status, 2, tsc.stdout)
      assert.match(tsc.stdout, /lib\/executor\/runs\.js\(\d+,\d+\): error TS2339: Property 'callId' does not exist on type 'Start'/)
    } finally {
      fs.rmSync(dir, { recursive: true, force: true })
    }
  })

  it('each record is written by the engine and read by the JS layer in the one order it declares, whatever that is', () => {
    const { dir, file } = editedDeclaration((d) => {
      for (const record of Object.values(d.records)) record.fields.reverse()
    })
    try {
      assert.equal(genWire('--declaration', file, '--root', dir).status, 0)
      const rust = fs.readFileSync(path.join(dir, 'crates/core/src/generated/engine.rs'), 'utf8')
      const js = require(path.join(dir, 'lib/engine/wire.generated.js'))
      const start = JSON.parse(fs.readFileSync(file, 'utf8')).records.Start
      const written = [...rust.slice(rust.indexOf('impl serde::Serialize for Start')).matchAll(/serialize_element\(&self\.(\w+)\)/g)].slice(0, 7).map((m) => m[1])
      assert.deepEqual(written, ['index', 'attempt', 'args', 'name', 'call_id', 'turn', 'run'])
      const record = start.fields.map((f) => `${f.name}!`)
      assert.deepEqual(Object.entries(js.readStart(record)).map(([k, v]) => [k, v.slice(0, -1)]).every(([k, v]) => k === v), true)
      const heads = new Uint32Array(js.SETTLEMENT_HEAD_LENGTH)
      js.writeSettlementHead(heads, 0, { run: 7, kindLength: 4, payloadLength: 2 })
      assert.deepEqual([...heads], [2, 4, 7], 'written in the declared order')
      assert.match(fs.readFileSync(path.join(dir, 'crates/core/src/generated/normalize.rs'), 'utf8'), /payload_length: at\[0\],\s+kind_length: at\[1\],\s+run: at\[2\],/)
    } finally {
      fs.rmSync(dir, { recursive: true, force: true })
    }
  })

  it('refuses a declaration whose names would not cross: a field that is not camelCase, or one declared twice', () => {
    const bad = declared()
    bad.records.Start.fields[0].name = 'run_id'
    assert.throws(() => generate(bad), /Start: field "run_id" must be camelCase/)
    const twice = declared()
    twice.objects.Step.fields.push({ ...twice.objects.Step.fields[0] })
    assert.throws(() => generate(twice), /Step: field "turn" is declared twice/)
    const hidden = declared()
    hidden.records.Progress.fields.push({ name: 'secret', rust: 'String', ts: null })
    assert.throws(() => generate(hidden), /Progress: a record's fields all cross/)
    const unknownDefault = declared()
    unknownDefault.objects.OnError.fields[0].default = 'ajar'
    assert.throws(() => generate(unknownDefault), /OnError\.cache: default "ajar" is not a value of the enum Fail/)
    const partial = declared()
    delete partial.objects.OnError.fields[1].default
    assert.throws(() => generate(partial), /OnError: every field declares a default, or none does/)
    const clash = declared()
    clash.keys.HOST_KIND = { ...clash.keys.TURN_OPTIONS }
    assert.throws(() => generate(clash), /two declarations make the JS name HOST_KIND/)
    const again = declared()
    again.objects.Start = again.objects.Reply
    assert.throws(() => generate(again), /name "Start" is declared twice/)
  })

  it('finds a generated file the declaration no longer makes, and removes it when it writes', () => {
    const { dir, file } = editedDeclaration(() => {})
    try {
      assert.equal(genWire('--declaration', file, '--root', dir).status, 0)
      const left = path.join(dir, 'crates/core/src/generated/dropped.rs')
      fs.writeFileSync(left, '// a module the declaration dropped\n')
      const check = genWire('--check', '--declaration', file, '--root', dir)
      assert.equal(check.status, 1)
      assert.match(check.stderr, /generated\/dropped\.rs/)
      assert.equal(genWire('--declaration', file, '--root', dir).status, 0)
      assert.equal(fs.existsSync(left), false)
      assert.deepEqual(genWire('--list').stdout.trim().split('\n'), generate(declared()).map(([f]) => f))
    } finally {
      fs.rmSync(dir, { recursive: true, force: true })
    }
  })

  it('every store operation it declares has its handler in the Redis store, and no other is taken', async () => {
    const client = { status: 'ready', call: async () => { throw new Error('the server is a stub') }, on() {}, options: {} }
    const store = redisStore({ client })
    const replies = await store.run([...wire.STORE_OPS.map((op) => ({ op, key: 'k', session: 's', field: 'f', owner: 'o', value: 'v' })), { op: 'undeclared' }])
    for (const [at, op] of wire.STORE_OPS.entries()) assert.doesNotMatch(replies[at].error ?? '', /unknown store op/, op)
    assert.match(replies.at(-1).error, /unknown store op "undeclared"/)
  })

  it('the readers give each record its fields by name', () => {
    assert.deepEqual(wire.readHostRequest([3, 'approve', 1, 'c', 'rm', { path: '/' }, 'ask:rm', 'destructive', 2]), {
      ticket: 3, kind: 'approve', turn: 1, callId: 'c', name: 'rm', args: { path: '/' }, rule: 'ask:rm', reason: 'destructive', index: 2,
    })
    assert.deepEqual(wire.readLate([4, 'timeout', 'resolved', 12.5]), { run: 4, endedBy: 'timeout', outcome: 'resolved', afterMs: 12.5 })
    assert.equal(wire.RESULT_FLAG.asSent, 32)
    assert.equal(wire.HOST_KIND.approve, 'approve')
  })
})
