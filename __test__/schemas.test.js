'use strict'
// Tool schemas declared with zod, valibot and ArkType: turned into JSON Schema once at registration, validated and
// repaired by the engine, and the schema's own refinements, transforms and defaults run after it. Values that are
// no schema throw at `register`.

const { describe, it, before } = require('node:test')
const assert = require('node:assert/strict')
const { z } = require('zod')
const { ToolExecutor } = require('..')
const { assertFailure, assertSuccess, deferred, gateWith, marks, sleep } = require('./helpers')

let v, toStandardJsonSchema, type
before(async () => {
  v = await import('valibot')
  ;({ toStandardJsonSchema } = await import('@valibot/to-json-schema'))
  ;({ type } = await import('arktype'))
})

const call = (name, input, id = 'c1') => ({ id, name, input })
/** A tool whose handler reports the arguments it received, as JSON. */
const echo = (spec) => ({ handler: (args) => JSON.stringify(args), ...spec })
// The output's first line: a repair adds a note after it.
const received = (result) => JSON.parse(result.output.split('\n')[0])

describe('zod schemas', () => {
  const weather = z.object({
    city: z.string().min(1).describe('The city'),
    units: z.enum(['c', 'f']).default('c'),
  })

  it('validates in the engine what used to run unchecked, and the model sees the JSON Schema, not zod internals', async () => {
    const { gate, calls } = gateWith([echo({ name: 'weather', parameters: weather })])
    const [wrongType, missing, ok] = await gate.execute([call('weather', { city: { name: 'Oslo' } }, 'a'), call('weather', {}, 'b'), call('weather', { city: 'Oslo' }, 'c')])
    assertFailure(wrongType, 'invalid_arguments', '/city: must be a string, got an object')
    assertFailure(missing, 'invalid_arguments', 'missing required property "city"')
    assert.deepEqual(received(ok), { city: 'Oslo', units: 'c' }, 'the default is filled in: the handler gets the output')
    assert.equal(calls.weather, 1)
    const [def] = gate.definitions('anthropic')
    assert.equal(def.input_schema.type, 'object')
    assert.deepEqual(def.input_schema.required, ['city'], 'a field with a default is optional to the model')
    assert.equal(def.input_schema.properties.city.description, 'The city')
    assert.equal(def.input_schema.properties.units.default, 'c')
    assert.equal(def.input_schema.def, undefined)
    assert.equal(def.input_schema.$schema, undefined, 'the default dialect is not named to providers')
  })

  it('repairs against the converted schema (a number sent as text) before zod sees the arguments', async () => {
    const { gate } = gateWith([echo({ name: 'page', parameters: z.object({ n: z.number().int().refine((n) => n > 0, 'must be positive') }) })])
    const [result] = await gate.execute([call('page', { n: '3' })])
    assertSuccess(result)
    assert.deepEqual(received(result), { n: 3 })
    assert.ok(result.metadata.repairs.length > 0)
  })

  it('runs refinements after the engine, as invalid_arguments worded like the engine, before permission', async () => {
    const approvals = []
    const { gate, calls } = gateWith([
      echo({
        name: 'transfer',
        needsApproval: true,
        parameters: z.object({ from: z.string(), to: z.string(), amount: z.number() })
          .refine((t) => t.from !== t.to, { message: 'from and to must differ', path: ['to'] })
          .refine((t) => t.amount > 0, 'amount must be positive'),
      }),
    ], { approve: (request) => { approvals.push(request); return true } })
    const [refused] = await gate.execute([call('transfer', { from: 'a', to: 'a', amount: -1 })])
    assertFailure(refused, 'invalid_arguments',
      'The arguments do not match the parameters of "transfer" (2 problems):\n- /to: from and to must differ\n- (arguments): amount must be positive\nFix these and call the tool again.')
    assert.deepEqual(marks(refused).slice(-2), ['validate:ok', 'schema:refused'])
    assert.equal(approvals.length, 0, 'an invalid call is never put to the approver')
    assert.equal(calls.transfer, 0)
    const [ok] = await gate.execute([call('transfer', { from: 'a', to: 'b', amount: 5 })])
    assertSuccess(ok)
    assert.equal(approvals.length, 1)
  })

  it('applies transforms and preprocessing: the handler receives the output, the model is shown the input', async () => {
    const { gate } = gateWith([echo({
      name: 'tag',
      parameters: z.object({
        name: z.string().trim().toLowerCase(),
        size: z.string().transform((s) => s.length),
        when: z.preprocess((x) => (typeof x === 'string' ? x : String(x)), z.string()),
      }),
    })])
    const [result] = await gate.execute([call('tag', { name: '  HeLLo ', size: 'four', when: 'now' })])
    assert.deepEqual(received(result), { name: 'hello', size: 4, when: 'now' })
    assert.equal(gate.definitions('anthropic')[0].input_schema.properties.size.type, 'string')
  })

  it('awaits async refinements, and keeps the order of results', async () => {
    const taken = new Set(['root'])
    const gate = new ToolExecutor()
    gate.register(echo({
      name: 'signup',
      readOnly: true,
      parameters: z.object({ user: z.string() }).refine(async ({ user }) => {
        await sleep(user === 'slow' ? 30 : 1)
        return !taken.has(user)
      }, { message: 'that name is taken', path: ['user'] }),
    }))
    const results = await gate.execute([call('signup', { user: 'slow' }, 'a'), call('signup', { user: 'root' }, 'b'), call('signup', { user: 'ok' }, 'c')])
    assert.deepEqual(results.map((r) => r.callId), ['a', 'b', 'c'])
    assertSuccess(results[0])
    assertFailure(results[1], 'invalid_arguments', '- /user: that name is taken')
    assertSuccess(results[2])
  })

  it('skips its own pass when JSON Schema says everything the schema checks', async () => {
    const { gate } = gateWith([
      echo({ name: 'plain', parameters: z.object({ q: z.string().max(20), n: z.number().int().min(1).optional(), i: z.int().max(9).optional(), f: z.float32().optional(), tags: z.array(z.enum(['a', 'b'])), at: z.union([z.string(), z.null()]) }) }),
      echo({ name: 'refined', parameters: z.object({ q: z.string().refine((s) => s !== 'x') }) }),
      echo({ name: 'email', parameters: z.object({ to: z.email() }) }),
    ])
    const [plain, refined, email, badEmail] = await gate.execute([
      call('plain', { q: 'x', tags: ['a'], at: null }, 'a'), call('refined', { q: 'y' }, 'b'), call('email', { to: 'a@b.co' }, 'c'), call('email', { to: 'nope' }, 'd'),
    ])
    assert.ok(!marks(plain).some((m) => m.startsWith('schema:')), marks(plain).join(' '))
    assert.deepEqual(received(plain), { q: 'x', tags: ['a'], at: null })
    assert.ok(marks(refined).includes('schema:ok'))
    assert.ok(marks(email).includes('schema:ok'), 'a format the engine does not assert is zod\'s to check')
    assertFailure(badEmail, 'invalid_arguments', '/to')
  })

  it('leaves patterns the engine cannot compile (lookarounds) to zod instead of refusing the tool', async () => {
    const { gate } = gateWith([echo({ name: 'code', parameters: z.object({ code: z.string().regex(/^(?!0)\d+$/, 'no leading zero') }) })])
    const [ok, bad] = await gate.execute([call('code', { code: '120' }, 'a'), call('code', { code: '012' }, 'b')])
    assertSuccess(ok)
    assertFailure(bad, 'invalid_arguments', '- /code: no leading zero')
    assert.equal(gate.definitions('anthropic')[0].input_schema.properties.code.pattern, '^(?!0)\\d+$', 'the model still sees it')
    // A JSON Schema the engine alone validates still may not carry one.
    assert.throws(() => gate.register({ name: 'raw', parameters: { type: 'object', properties: { c: { type: 'string', pattern: '^(?!0)' } } }, handler: () => 1 }), /is not a valid JSON Schema/)
  })

  it('takes zod 4 schemas from before the JSON Schema extension (4.1) through zod\'s own converter', async () => {
    const { z: z41 } = require('zod41')
    const schema = z41.object({ city: z41.string(), days: z41.number().default(1) })
    assert.equal(schema['~standard'].jsonSchema, undefined)
    const { gate } = gateWith([echo({ name: 'forecast', parameters: schema })])
    const [bad, ok] = await gate.execute([call('forecast', { city: [1] }, 'a'), call('forecast', { city: 'Rome' }, 'b')])
    assertFailure(bad, 'invalid_arguments', '/city: must be a string')
    assert.deepEqual(received(ok), { city: 'Rome', days: 1 })
  })

  it('runs a retry on a fresh output, and hands check() the output too', async () => {
    const seen = []
    const gate = new ToolExecutor({ retry: { maxRetries: 1, initialDelayMs: 1 } })
    gate.register({
      name: 'flaky',
      idempotent: true,
      cache: false,
      parameters: z.object({ list: z.string().transform((s) => s.split(',')) }),
      check: (args) => { seen.push(['check', structuredClone(args)]) },
      handler: (args, ctx) => {
        seen.push([`attempt ${ctx.attempt}`, structuredClone(args)])
        args.list.push('mutated')
        if (ctx.attempt === 1) throw Object.assign(new Error('busy'), { retryable: true })
        return 'done'
      },
    })
    const [result] = await gate.execute([call('flaky', { list: 'a,b' })])
    assertSuccess(result, 'done')
    assert.deepEqual(seen, [['check', { list: ['a', 'b'] }], ['attempt 1', { list: ['a', 'b'] }], ['attempt 2', { list: ['a', 'b'] }]])
  })

  it('drops the keys zod strips when its own pass is skipped, at any depth; loose objects keep them', async () => {
    const { gate } = gateWith([
      echo({ name: 'save', parameters: z.object({ name: z.string(), tags: z.array(z.object({ id: z.int() })), meta: z.record(z.string(), z.object({ v: z.string() })).optional() }) }),
      echo({ name: 'loose', parameters: z.looseObject({ name: z.string() }) }),
      echo({ name: 'strict', parameters: z.strictObject({ name: z.string() }) }),
    ])
    const [save, loose, strict] = await gate.execute([
      call('save', { name: 'eve', role: 'admin', tags: [{ id: 1, sneaky: true }], meta: { a: { v: 'x', w: 1 } } }, 'a'),
      call('loose', { name: 'eve', role: 'admin' }, 'b'),
      call('strict', { name: 'eve', role: 'admin' }, 'c'),
    ])
    assert.ok(!marks(save).some((m) => m.startsWith('schema:')), 'still no second pass')
    assert.deepEqual(received(save), { name: 'eve', tags: [{ id: 1 }], meta: { a: { v: 'x' } } })
    assert.deepEqual(received(loose), { name: 'eve', role: 'admin' })
    assertFailure(strict, 'invalid_arguments', 'unexpected property "role"')
  })

  it('leaves what zod judges better to zod: regex flags, catch, coercion', async () => {
    const { gate } = gateWith([echo({
      name: 'lenient',
      parameters: z.object({ code: z.string().regex(/^abc$/i), units: z.enum(['c', 'f']).catch('c'), on: z.coerce.boolean(), n: z.coerce.number() }),
    })])
    const [result] = await gate.execute([call('lenient', { code: 'ABC', units: 'kelvin', on: 'yes', n: true })])
    assert.deepEqual(received(result), { code: 'ABC', units: 'c', on: true, n: 1 })
    const [bad] = await gate.execute([call('lenient', { code: 'abd', units: 'c', on: 1, n: 1 })])
    assertFailure(bad, 'invalid_arguments', '- /code: ')
  })

  it('only ever widens what the engine lets through: xor of patterns, catch of a missing key, preprocess, loose records', async () => {
    const { gate } = gateWith([
      echo({ name: 'xor', parameters: z.object({ u: z.xor([z.string().regex(/^a/), z.string().regex(/^b/)]) }) }),
      echo({ name: 'caught', parameters: z.object({ q: z.string(), n: z.number().catch(10), tags: z.array(z.string()).catch([]) }) }),
      echo({ name: 'pre', parameters: z.object({ list: z.preprocess((v) => (typeof v === 'string' ? v.split(',') : v), z.array(z.string()).min(2)) }) }),
      echo({ name: 'loose', parameters: z.object({ r: z.looseRecord(z.string().min(2), z.string()) }) }),
    ])
    const [xor, caught, pre, loose, xorBad] = await gate.execute([
      call('xor', { u: 'abc' }, 'a'), call('caught', { q: 'x' }, 'b'), call('pre', { list: 'a,b' }, 'c'), call('loose', { r: { xy: 'a', x: 5 } }, 'd'),
      call('xor', { u: 'cde' }, 'e'),
    ])
    assert.deepEqual(received(xor), { u: 'abc' })
    assert.deepEqual(received(caught), { q: 'x', n: 10, tags: [] })
    assert.deepEqual(received(pre), { list: ['a', 'b'] })
    assert.deepEqual(received(loose), { r: { xy: 'a', x: 5 } })
    assertFailure(xorBad, 'invalid_arguments', '/u')
  })

  it('takes zod/mini schemas and a root declared with .meta({ id })', async () => {
    const zm = require('zod/mini')
    const { gate } = gateWith([
      echo({ name: 'mini', parameters: zm.object({ a: zm.string().check(zm.minLength(2)) }) }),
      echo({ name: 'named', parameters: z.object({ q: z.string() }).meta({ id: 'SearchArgs' }) }),
    ])
    const [mini, short, named] = await gate.execute([call('mini', { a: 'ok' }, 'a'), call('mini', { a: 'x' }, 'b'), call('named', { q: 'x' }, 'c')])
    assert.deepEqual(received(mini), { a: 'ok' })
    assertFailure(short, 'invalid_arguments', '/a')
    assert.deepEqual(received(named), { q: 'x' })
    assert.equal(gate.definitions('anthropic')[1].input_schema.type, 'object')
  })

  it('never starts a retry whose own validation outlasts its call', async () => {
    let started = 0
    const gate = new ToolExecutor({ retry: { maxRetries: 1, initialDelayMs: 1 } })
    gate.register({
      name: 'pay',
      idempotent: true,
      cache: false,
      timeoutMs: 60,
      parameters: z.object({ to: z.string() }).refine(async () => { await sleep(started === 0 ? 0 : 200); return true }),
      handler: () => {
        started += 1
        throw Object.assign(new Error('busy'), { retryable: true })
      },
    })
    const [result] = await gate.execute([call('pay', { to: 'bob' })])
    assertFailure(result, 'timeout')
    await sleep(250)
    assert.equal(started, 1, 'the second attempt timed out while validating: its handler never ran')
    assert.deepEqual(gate.pendingHandlers(), [])
  })

  it('records no late settlement for a retry whose validation fails after its call ended', async () => {
    let attempts = 0
    const traces = []
    const gate = new ToolExecutor({ retry: { maxRetries: 1, initialDelayMs: 1 }, onTrace: (events) => traces.push(...events) })
    gate.register({
      name: 'pay',
      idempotent: true,
      cache: false,
      timeoutMs: 60,
      parameters: z.object({ to: z.string() }).refine(async () => { attempts += 1; await sleep(attempts === 1 ? 0 : 150); return attempts === 1 }),
      handler: () => { throw Object.assign(new Error('busy'), { retryable: true }) },
    })
    const [result] = await gate.execute([call('pay', { to: 'bob' })])
    assertFailure(result, 'timeout')
    await sleep(200)
    assert.equal(attempts, 2)
    assert.equal(gate.stats().total.lateSettlements ?? 0, 0)
    assert.deepEqual(traces.filter((t) => t.type === 'late_settlement'), [])
    assert.deepEqual(gate.pendingHandlers(), [])
  })

  it('validates arguments edited at approval with the schema\'s own checks, and runs on their output', async () => {
    let edit
    const { gate, calls } = gateWith([echo({
      name: 'send',
      needsApproval: true,
      parameters: z.object({ to: z.string().transform((s) => s.toUpperCase()) }).refine((a) => a.to !== 'EVE', { message: 'not to eve', path: ['to'] }),
    })], { approve: () => ({ decision: 'approve', arguments: edit }) })
    edit = { to: 'eve' }
    const [refused] = await gate.execute([call('send', { to: 'bob' })])
    assertFailure(refused, 'invalid_arguments', 'edited at approval', '- /to: not to eve')
    assert.equal(calls.send, 0)
    edit = { to: 'carol' }
    const [ok] = await gate.execute([call('send', { to: 'bob' })])
    assert.deepEqual(received(ok), { to: 'CAROL' })
  })

  it('holds edited arguments to the tool\'s check too, on the schema\'s output', async () => {
    const checked = []
    const { gate, calls } = gateWith([{
      name: 'read',
      needsApproval: true,
      parameters: z.object({ path: z.string().trim() }),
      check: ({ path }) => { checked.push(path); return path.endsWith('.key') ? 'key files are off limits' : undefined },
      handler: ({ path }) => path,
    }], { approve: () => ({ decision: 'approve', arguments: { path: ' secret.key ' } }) })
    const [refused] = await gate.execute([call('read', { path: 'a.txt' })])
    assertFailure(refused, 'invalid_arguments', 'edited at approval', 'key files are off limits')
    assert.deepEqual(checked, ['a.txt', 'secret.key'])
    assert.equal(calls.read, 0)
  })

  it('bounds the validation of edited arguments by checkTimeoutMs, and reads issues: [] as a failure', async () => {
    const odd = (name, validate) => ({ name, needsApproval: true, handler: () => 'ran', parameters: { '~standard': { version: 1, vendor: 'odd', validate, jsonSchema: { input: () => ({ type: 'object' }) } } } })
    let edits = 0
    const { gate, calls } = gateWith([
      odd('hangs', () => (edits++ === 0 ? { value: {} } : new Promise(() => {}))),
      odd('empty', (value) => (value.to === 'mallory' ? { issues: [] } : { value })),
    ], { checkTimeoutMs: 50, approve: () => ({ decision: 'approve', arguments: { to: 'mallory' } }) })
    const started = Date.now()
    const [hung] = await gate.execute([call('hangs', {})])
    assert.ok(Date.now() - started < 1_000, 'not the 60 s approval limit')
    assertFailure(hung, 'invalid_arguments', 'edited at approval', "the schema's own validation of them gave no answer within 50 ms")
    const [empty] = await gate.execute([call('empty', { to: 'bob' })])
    assertFailure(empty, 'invalid_arguments', 'edited at approval', 'the schema refused the value without saying why')
    assert.deepEqual(Object.values(calls), [0, 0])
  })

  it('fails the call, never the process, when the schema\'s validation throws, hangs or answers nonsense', async () => {
    const odd = (name, validate) => ({ name, parameters: { '~standard': { version: 1, vendor: 'odd', validate, jsonSchema: { input: () => ({ type: 'object' }) } } } })
    const { gate, calls } = gateWith([
      odd('throws', () => { throw new Error('validator broke') }),
      odd('rejects', () => Promise.reject('no reason')),
      odd('hangs', () => new Promise(() => {})),
      odd('nonsense', () => 42),
    ], { checkTimeoutMs: 50 })
    const results = await gate.execute(['throws', 'rejects', 'hangs', 'nonsense'].map((name, i) => call(name, {}, `c${i}`)))
    assertFailure(results[0], 'handler_error', 'its schema\'s own validation failed', 'validator broke')
    assertFailure(results[1], 'handler_error', 'its schema\'s own validation failed', 'no reason')
    assertFailure(results[2], 'handler_error', 'its schema\'s own validation failed', 'no validation came within 50 ms')
    assertFailure(results[3], 'handler_error', 'neither { value } nor { issues }')
    assert.deepEqual(Object.values(calls), [0, 0, 0, 0])
  })

  it('refuses zod 3 schemas and zod schemas JSON cannot carry, saying what to do', () => {
    const gate = new ToolExecutor()
    const { z: z3 } = require('zod3')
    assert.throws(() => gate.register({ name: 'old', parameters: z3.object({ a: z3.string() }), handler: () => 1 }),
      { name: 'TypeError', message: /tool "old": parameters: a zod 3 schema carries no JSON Schema: use zod 4/ })
    assert.throws(() => gate.register({ name: 'dated', parameters: z.object({ at: z.date() }), handler: () => 1 }),
      { name: 'TypeError', message: /tool "dated": parameters: the zod schema cannot be turned into JSON Schema: Date cannot be represented/ })
    assert.throws(() => gate.register({ name: 'str', parameters: z.string(), handler: () => 1 }), /must be a JSON Schema of an object/)
    assert.deepEqual(gate.list(), [])
  })
})

describe('values that are no schema', () => {
  it('throw at register, naming what they got', () => {
    const gate = new ToolExecutor()
    class Shape { constructor() { this.type = 'object' } }
    const cases = [
      [new Shape(), 'an instance of Shape'],
      [new Map(), 'an instance of Map'],
      [[{ type: 'object' }], 'an array'],
      ['{"type":"object"}', 'a string'],
      [() => ({}), 'a function'],
      [null, 'null'],
      [{ '~standard': { version: 1, vendor: 'mystery', validate: () => ({ value: {} }) } }, 'this mystery schema offers no JSON Schema'],
    ]
    for (const [parameters, said] of cases) {
      assert.throws(() => gate.register({ name: 'bad', parameters, handler: () => 1 }), (err) => {
        assert.equal(err.name, 'TypeError')
        assert.ok(err.message.startsWith('tool "bad": parameters'), err.message)
        assert.ok(err.message.includes(said), err.message)
        return true
      })
    }
    assert.throws(() => gate.register({ name: 'bad', outputSchema: new Shape(), handler: () => 1 }), /tool "bad": outputSchema must be a JSON Schema .* got an instance of Shape/)
    const cyclic = { type: 'object', properties: {} }
    cyclic.properties.self = cyclic
    assert.throws(() => gate.register({ name: 'bad', parameters: cyclic, handler: () => 1 }), /tool "bad": parameters: the schema contains itself or is nested too deeply/)
    assert.throws(() => gate.register({ name: 'bad', parameters: { type: 'object', properties: { n: z.number() } }, handler: () => 1 }),
      /tool "bad": parameters: a zod schema at \/properties\/n inside a JSON Schema cannot be sent to a model/)
    assert.deepEqual(gate.list(), [])
  })
})

describe('valibot schemas', () => {
  it('validates, refines, transforms and fills defaults through its Standard JSON Schema adapter', async () => {
    const schema = toStandardJsonSchema(v.object({
      city: v.pipe(v.string(), v.minLength(1), v.check((s) => s !== 'Atlantis', 'no such city')),
      days: v.optional(v.pipe(v.string(), v.transform(Number)), '1'),
    }))
    const { gate, calls } = gateWith([echo({ name: 'trip', parameters: schema })])
    const [bad, refined, ok] = await gate.execute([call('trip', { city: { at: 3 } }, 'a'), call('trip', { city: 'Atlantis' }, 'b'), call('trip', { city: 'Lima' }, 'c')])
    assertFailure(bad, 'invalid_arguments', '/city: must be a string, got an object')
    assertFailure(refined, 'invalid_arguments', '- /city: no such city')
    assert.deepEqual(received(ok), { city: 'Lima', days: 1 })
    assert.equal(calls.trip, 1)
    assert.deepEqual(gate.definitions('anthropic')[0].input_schema.required, ['city'])
  })

  it('refuses a valibot schema without the adapter, naming it', () => {
    assert.throws(() => new ToolExecutor().register({ name: 'raw', parameters: v.object({ a: v.string() }), handler: () => 1 }),
      /this valibot schema offers no JSON Schema .*toStandardJsonSchema\(\) from @valibot\/to-json-schema/)
  })
})

describe('ArkType schemas', () => {
  it('validates, narrows, morphs and fills defaults', async () => {
    const schema = type({ city: 'string > 0', 'units?': "'c' | 'f'", days: 'number = 1', name: 'string.trim' })
      .narrow((t, ctx) => t.city !== 'Atlantis' || ctx.mustBe('a real city'))
    const { gate, calls } = gateWith([echo({ name: 'trip', parameters: schema })])
    const [bad, narrowed, ok] = await gate.execute([
      call('trip', { city: { at: 3 }, name: 'x' }, 'a'), call('trip', { city: 'Atlantis', name: 'x' }, 'b'), call('trip', { city: 'Lima', name: ' Ann ' }, 'c'),
    ])
    assertFailure(bad, 'invalid_arguments', '/city: must be a string, got an object')
    assertFailure(narrowed, 'invalid_arguments', 'a real city')
    assert.deepEqual(received(ok), { city: 'Lima', name: 'Ann', days: 1 })
    assert.equal(calls.trip, 1)
  })
})

describe('outputSchema', () => {
  const report = { type: 'object', properties: { total: { type: 'number' }, rows: { type: 'array' } }, required: ['total', 'rows'] }

  it('checks a handler\'s structured return value: a mismatch is a handler_error naming the fields, never retried', async () => {
    let value
    const { gate, calls } = gateWith([{ name: 'report', readOnly: true, outputSchema: report, handler: () => value }], { retry: { maxRetries: 2, initialDelayMs: 1 } })
    value = { total: 2, rows: [1, 2] }
    const [ok] = await gate.execute([call('report', {})])
    assertSuccess(ok)
    assert.deepEqual(ok.metadata.structured, value)
    value = { total: 'two' }
    const [bad] = await gate.execute([call('report', {})])
    assertFailure(bad, 'handler_error', 'Tool "report" returned a value that does not match its outputSchema (2 problems)',
      '- /total: must be a number, got a string', '- (the value): missing required property "rows"', 'The tool is at fault')
    assert.equal(bad.retryable, false)
    value = 'just text'
    const [text] = await gate.execute([call('report', {})])
    assertFailure(text, 'handler_error', '(the value): must be an object, got a string')
    assert.equal(calls.report, 3)
  })

  it('runs a Standard Schema output schema\'s own checks, sync or async, on the returned value', async () => {
    let value
    const { gate } = gateWith([
      { name: 'sync', outputSchema: z.object({ n: z.number() }).refine((o) => o.n % 2 === 0, { message: 'must be even', path: ['n'] }), handler: () => value },
      { name: 'async', outputSchema: z.object({ n: z.number() }).refine(async (o) => { await sleep(5); return o.n < 10 }, { message: 'too big', path: ['n'] }), handler: () => value },
    ])
    value = { n: 3 }
    const [odd] = await gate.execute([call('sync', {})])
    assertFailure(odd, 'handler_error', 'returned a value that does not match its outputSchema (1 problem)', '- /n: must be even')
    value = { n: 12 }
    const [big, even] = await gate.execute([call('async', {}, 'a'), call('sync', {}, 'b')])
    assertFailure(big, 'handler_error', '- /n: too big')
    assertSuccess(even)
    value = { n: 'x' }
    const [wrong] = await gate.execute([call('sync', {})])
    assertFailure(wrong, 'handler_error', '/n')
  })

  it('settles the call whatever the output validation does, and never lets one call\'s issues sink another turn', async () => {
    const odd = (name, validate) => ({ name, readOnly: true, handler: () => ({ status: 'caf\ud83d' }), outputSchema: { '~standard': { version: 1, vendor: 'odd', validate, jsonSchema: { input: () => ({}) } } } })
    const { gate } = gateWith([
      odd('nonsense', () => Promise.resolve(null)),
      odd('badIssues', () => Promise.resolve({ get issues() { throw new Error('boom') } })),
      odd('thenGetter', () => ({ get then() { throw new Error('then getter') } })),
      odd('surrogate', (v) => ({ issues: [{ message: `received "${v.status}"`, path: ['status'] }] })),
      { name: 'slow', readOnly: true, handler: () => sleep(30, 'slow done') },
    ])
    const other = gate.execute([call('slow', {}, 's')])
    const results = await gate.execute(['nonsense', 'badIssues', 'thenGetter', 'surrogate'].map((n, i) => call(n, {}, `c${i}`)))
    assertFailure(results[0], 'handler_error', 'neither { value } nor { issues }')
    assertFailure(results[1], 'handler_error', 'boom')
    assertFailure(results[2], 'handler_error', 'then getter')
    assertFailure(results[3], 'handler_error', '- /status: received "caf\ufffd"')
    assertSuccess((await other)[0], 'slow done')
  })

  it('checks values, text and nothing, but not bytes or images', async () => {
    let value
    const { gate } = gateWith([
      { name: 'json', outputSchema: { type: 'object' }, handler: () => value },
      { name: 'zod', outputSchema: z.object({ n: z.number() }).optional(), handler: () => value },
    ])
    const run = async (name) => (await gate.execute([call(name, {})]))[0]
    value = undefined
    assertFailure(await run('json'), 'handler_error', '(the value): must be an object, got null')
    assertSuccess(await run('zod'), undefined)
    value = Buffer.from('abc')
    assertSuccess(await run('json'))
    value = { type: 'image', data: Buffer.from('x').toString('base64'), mediaType: 'image/png' }
    assertSuccess(await run('json'))
    // A schema whose own checks run in JS judges values, not content either.
    const { gate: refined } = gateWith([{ name: 'r', outputSchema: z.object({ n: z.number() }).refine(() => true), handler: () => value }])
    for (const content of [Buffer.from('abc'), value, [{ type: 'text', text: 'a chart' }, value]]) {
      value = content
      assertSuccess((await refined.execute([call('r', {})]))[0])
    }
  })

  it('is shown by list() and by the definitions of the formats that carry one', () => {
    const gate = new ToolExecutor()
    gate.register({ name: 'report', outputSchema: z.object({ total: z.number() }), handler: () => ({ total: 1 }) })
    const expected = { type: 'object', properties: { total: { type: 'number' } }, required: ['total'] }
    assert.deepEqual(gate.list()[0].outputSchema, expected)
    assert.deepEqual(gate.definitions('ai-sdk')[0].outputSchema, expected)
    const withHelper = gate.definitions('ai-sdk', { jsonSchema: (schema) => ({ wrapped: schema }) })
    assert.deepEqual(withHelper.report.outputSchema, { wrapped: expected })
    for (const format of ['anthropic', 'openai-chat', 'openai-responses']) {
      assert.ok(!JSON.stringify(gate.definitions(format)).includes('outputSchema'), format)
    }
  })

  it('times an output check out with the call: a hanging output validation is the call\'s timeout', async () => {
    const hang = deferred()
    const { gate } = gateWith([{ name: 'slow', timeoutMs: 40, outputSchema: { '~standard': { version: 1, vendor: 'odd', validate: () => hang.promise, jsonSchema: { input: () => ({}) } } }, handler: () => ({}) }])
    const [result] = await gate.execute([call('slow', {})])
    assertFailure(result, 'timeout')
  })
})
