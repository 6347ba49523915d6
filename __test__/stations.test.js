'use strict'
// The stations before invoke: lookup, parse, validate, permission. A refused call never reaches its handler.

const { describe, it } = require('node:test')
const assert = require('node:assert/strict')
const { gateWith, assertFailure, assertSuccess, marks } = require('./helpers')

/** A refusal: the kind, never retryable, never run, traced up to the refusing station. */
function assertRefused(result, kind, lastMark, ...fragments) {
  assertFailure(result, kind, ...fragments)
  assert.equal(result.retryable, false)
  assert.equal(result.attempts, 0)
  assert.equal(result.latencyMs, 0)
  assert.equal(result.truncated, false)
  assert.equal(result.cached, false)
  assert.equal(result.metadata.queuedMs, undefined, 'never queued')
  assert.equal(marks(result).at(-1), lastMark)
}

describe('lookup', () => {
  const tools = () => gateWith([{ name: 'web_search' }, { name: 'read_file' }, { name: 'write_file' }, { name: 'delete_file' }])

  it('names the unknown tool, lists the available ones and suggests the closest', async () => {
    const { gate, calls } = tools()
    const [dash, camel, typo, far] = await gate.execute([{ name: 'web-search' }, { name: 'WebSearch' }, { name: 'read_fiel' }, { name: 'deploy' }])
    const available = 'Available tools: web_search, read_file, write_file, delete_file. Call one of these by its exact name.'
    assertRefused(dash, 'unknown_tool', 'lookup:unknown_tool', 'There is no tool named "web-search". Did you mean "web_search"? ' + available)
    assert.equal(dash.name, 'web-search', 'the result keeps the name the model sent')
    assertRefused(camel, 'unknown_tool', 'lookup:unknown_tool', 'Did you mean "web_search"?')
    assertRefused(typo, 'unknown_tool', 'lookup:unknown_tool', 'Did you mean "read_file"?')
    assertRefused(far, 'unknown_tool', 'lookup:unknown_tool', 'There is no tool named "deploy". ' + available)
    assert.ok(!far.error.includes('Did you mean'), far.error)
    assert.deepEqual(marks(dash), ['lookup:unknown_tool'])
    assert.deepEqual(calls, { web_search: 0, read_file: 0, write_file: 0, delete_file: 0 })
  })

  it('says so when a call names no tool, and lists the shapes for an object that is no call at all', async () => {
    const { gate } = tools()
    const [empty, none, stray] = await gate.execute([{ id: 'x', name: '', input: {} }, { id: 'y', input: {} }, { text: 'hi' }])
    for (const r of [empty, none]) assertRefused(r, 'unknown_tool', 'lookup:unknown_tool', 'The call names no tool. Available tools: web_search,')
    assertRefused(stray, 'invalid_arguments', 'lookup:invalid_arguments', 'it has none of the fields of the shapes toolgate reads. Send one of: Anthropic tool_use')
  })

  it('with allowedTools, never names a tool outside the list, not even as a suggestion', async () => {
    const { gate } = tools()
    const context = { allowedTools: ['read_*', 'delete_file'] }
    const results = await gate.execute([{ name: 'web-search' }, { name: 'write-file' }, { name: 'read-file' }], { context })
    for (const r of results) {
      assertRefused(r, 'unknown_tool', 'lookup:unknown_tool', 'Available tools: read_file, delete_file.')
      assert.ok(!r.error.includes('web_search') && !r.error.includes('write_file'), r.error)
    }
    assert.ok(!results[0].error.includes('Did you mean'), 'the only close name is not allowed')
    assert.ok(results[2].error.includes('Did you mean "read_file"?'), 'suggestions come from the allowed tools')
  })

  it('never names a denied tool', async () => {
    const { gate } = tools()
    const [r] = await gate.execute([{ name: 'delete-file' }], { context: { deniedTools: ['delete_*'] } })
    assertRefused(r, 'unknown_tool', 'lookup:unknown_tool', 'Available tools: web_search, read_file, write_file.')
    assert.ok(!r.error.includes('delete_file'), r.error)
  })

  it('says no tools are available when the context allows none', async () => {
    const { gate } = tools()
    const [r] = await gate.execute([{ name: 'x' }], { context: { allowedTools: [] } })
    assertRefused(r, 'unknown_tool', 'lookup:unknown_tool', 'There is no tool named "x". No tools are available here; answer without calling a tool.')
  })
})

describe('parse', () => {
  // Repair off: these tests are about what the parser says (repair.test.js covers what is mended).
  const tool = () => gateWith([{ name: 'search', parameters: { type: 'object', properties: { q: { type: 'string' } } } }], { repair: false })

  it('refuses malformed JSON with the parser message and its line and column', async () => {
    const { gate, calls } = tool()
    const [comma, eof, multiline] = await gate.execute([
      { name: 'search', arguments: '{"q": "x",}' },
      { name: 'search', arguments: '{"q": ' },
      { name: 'search', arguments: '{\n  "q": "x"\n  "n": 1\n}' },
    ])
    assertRefused(comma, 'invalid_arguments', 'parse:invalid_arguments',
      'Tool "search": The arguments are not valid JSON (trailing comma at line 1 column 11). Send the arguments as one JSON object, e.g. {"key": "value"}.')
    assertRefused(eof, 'invalid_arguments', 'parse:invalid_arguments', 'not valid JSON', 'line 1 column 6')
    assertRefused(multiline, 'invalid_arguments', 'parse:invalid_arguments', 'not valid JSON', 'line 3 column')
    assert.deepEqual(marks(comma), ['lookup:found', 'parse:invalid_arguments'])
    assert.equal(calls.search, 0)
  })

  it('refuses arguments that are not an object, saying what they are', async () => {
    const { gate, calls } = tool()
    const results = await gate.execute([
      { name: 'search', arguments: '[1,2]' },
      { name: 'search', arguments: '42' },
      { name: 'search', arguments: 'null' },
      { name: 'search', arguments: '"q"' },
      { type: 'tool_use', id: 't', name: 'search', input: ['q'] },
      { type: 'tool_use', id: 'u', name: 'search', input: 7 },
      { type: 'tool-call', toolCallId: 'v', toolName: 'search', input: true },
    ])
    const what = ['an array', 'a number', 'null', 'a string', 'an array', 'a number', 'a boolean']
    results.forEach((r, i) => assertRefused(r, 'invalid_arguments', 'parse:invalid_arguments',
      `Tool "search": The arguments must be a JSON object with the tool's parameters as keys, but they are ${what[i]}.`))
    assert.equal(calls.search, 0)
  })
})

describe('validate', () => {
  const SECRET = 'sk-live-4f9a8b7c6d5e4f3a2b1c'
  const SCHEMA = {
    type: 'object',
    properties: {
      q: { type: 'string', minLength: 3, maxLength: 20, pattern: '^[a-z ]+$' },
      limit: { type: 'integer', minimum: 1, maximum: 10 },
      sort: { enum: ['relevance', 'date'] },
      apiKey: { type: 'number' },
      filters: {
        type: 'array',
        items: { type: 'object', properties: { field: { type: 'string' }, op: { const: 'eq' } }, required: ['field'] },
      },
    },
    required: ['q'],
    additionalProperties: false,
  }
  const tool = () => gateWith([{ name: 'search', parameters: SCHEMA }, { name: 'wide', parameters: {
    type: 'object',
    properties: Object.fromEntries(Array.from({ length: 15 }, (_, i) => [`p${i}`, { type: 'number' }])),
  } }])

  /** The problem lines of a validation error. */
  const problems = (error) => error.split('\n').filter((l) => l.startsWith('- '))

  it('lists every problem with its path, including nested ones', async () => {
    const { gate, calls } = tool()
    const [r] = await gate.execute([{ name: 'search', input: {
      q: 'ab', limit: 0, sort: 'newest', apiKey: 'x', extra: true, filters: [{ field: 5 }, { op: 'ne' }],
    } }])
    assertRefused(r, 'invalid_arguments', 'validate:invalid_arguments', 'The arguments do not match the parameters of "search" (8 problems):\n')
    assert.ok(r.error.endsWith('\nFix these and call the tool again.'), r.error)
    assert.deepEqual(problems(r.error).sort(), [
      '- (arguments): unexpected property "extra": remove it',
      '- /apiKey: must be a number, got a string',
      '- /filters/0/field: must be a string, got an integer',
      '- /filters/1/op: must be exactly "eq"',
      '- /filters/1: missing required property "field"',
      '- /limit: must be at least 1',
      '- /q: must be at least 3 characters long',
      '- /sort: must be one of "relevance", "date"',
    ].sort())
    assert.deepEqual(marks(r), ['lookup:found', 'parse:ok', 'validate:invalid_arguments'])
    assert.equal(calls.search, 0)
  })

  it('words each kind of schema error for a model', async () => {
    const { gate } = tool()
    const cases = [
      [{}, '- (arguments): missing required property "q"'],
      [{ q: 'abc', limit: 11 }, '- /limit: must be at most 10'],
      [{ q: 'abc', limit: 2.5 }, '- /limit: must be an integer, got a number'],
      [{ q: 'ABC' }, '- /q: must match the pattern ^[a-z ]+$'],
      [{ q: 'a'.repeat(21) }, '- /q: must be at most 20 characters long'],
      [{ q: 'abc', filters: {} }, '- /filters: must be an array, got an object'],
      [{ q: 'abc', a: 1, b: 2 }, '- (arguments): unexpected properties "a", "b": remove them'],
      [{ q: null }, '- /q: must be a string, got null'],
    ]
    const results = await gate.execute(cases.map(([input]) => ({ name: 'search', input })))
    results.forEach((r, i) => {
      assertRefused(r, 'invalid_arguments', 'validate:invalid_arguments', '(1 problem):\n')
      assert.deepEqual(problems(r.error), [cases[i][1]])
    })
  })

  it('never echoes the offending value', async () => {
    const { gate } = tool()
    const results = await gate.execute([
      { name: 'search', input: { q: 'abc', apiKey: SECRET } },
      { name: 'search', input: { q: SECRET } },
      { name: 'search', input: { q: 'abc', sort: SECRET } },
      { name: 'search', input: { q: 'abc', filters: [{ field: 'x', op: SECRET }] } },
      { name: 'search', arguments: JSON.stringify({ q: 'abc', limit: SECRET }) },
    ])
    for (const r of results) {
      assertRefused(r, 'invalid_arguments', 'validate:invalid_arguments')
      assert.ok(!r.output.includes(SECRET) && !r.error.includes('4f9a8b7c'), r.error)
    }
    assert.deepEqual(problems(results[0].error), ['- /apiKey: must be a number, got a string'])
  })

  it('never echoes a property name that fails propertyNames', async () => {
    const { gate } = gateWith([{ name: 'headers', parameters: { type: 'object', propertyNames: { maxLength: 16 } } }])
    const [r] = await gate.execute([{ name: 'headers', input: { [SECRET]: 'x' } }])
    assert.equal(r.errorKind, 'invalid_arguments')
    assert.ok(!r.error.includes(SECRET), r.error)
    assert.ok(r.error.includes('- (arguments): has a property name that is not allowed (the name must be at most 16 characters long)'), r.error)
  })

  it('lists the first 12 problems and counts the rest', async () => {
    const { gate } = tool()
    const input = Object.fromEntries(Array.from({ length: 15 }, (_, i) => [`p${i}`, 'x']))
    const [r] = await gate.execute([{ name: 'wide', input }])
    assertRefused(r, 'invalid_arguments', 'validate:invalid_arguments', '(15 problems):\n', '\n- … and 3 more\n')
    assert.equal(problems(r.error).length, 13)
  })

  it('lets valid arguments through to the handler', async () => {
    const { gate, calls } = tool()
    const [r] = await gate.execute([{ name: 'search', input: { q: 'abc', limit: 10, sort: 'date', filters: [{ field: 'a', op: 'eq' }] } }])
    assertSuccess(r, 'ok')
    assert.deepEqual(marks(r).slice(0, 4), ['lookup:found', 'parse:ok', 'validate:ok', 'permission:allowed'])
    assert.equal(calls.search, 1)
  })
})

describe('permission', () => {
  const tools = () => gateWith([
    { name: 'read_file', readOnly: true },
    { name: 'write_file' },
    { name: 'mcp__github__search', readOnly: true },
    { name: 'deploy', needsApproval: true },
  ])

  /**
   * A tool the context may not use is answered as a name that does not exist (a refusal naming it would tell the
   * model it is there), at lookup, so its arguments are not even read; the program still sees what hid it.
   */
  function assertDenied(result, name, list) {
    assertRefused(result, 'unknown_tool', 'lookup:unknown_tool', `There is no tool named "${name}".`)
    assert.ok(!/invalid|allowed/i.test(result.output), result.output)
    assert.deepEqual(marks(result), ['lookup:unknown_tool'])
    assert.deepEqual(result.metadata.permission, { decision: 'denied', by: `refused by the context's ${list}` })
  }

  it('allowedTools (with globs) refuses every other tool', async () => {
    const { gate, calls } = tools()
    const context = { allowedTools: ['read_*', 'mcp__*'] }
    const [read, write, mcp] = await gate.execute([{ name: 'read_file' }, { name: 'write_file' }, { name: 'mcp__github__search' }], { context })
    assertSuccess(read, 'ok')
    assertDenied(write, 'write_file', 'allowedTools')
    assertSuccess(mcp, 'ok')
    assert.deepEqual(calls, { read_file: 1, write_file: 0, mcp__github__search: 1, deploy: 0 })
  })

  it('deniedTools (with globs) refuses those tools, and wins over allowedTools', async () => {
    const { gate, calls } = tools()
    const [read, write] = await gate.execute([{ name: 'read_file' }, { name: 'write_file' }], { context: { deniedTools: ['*_file'] } })
    assertDenied(read, 'read_file', 'deniedTools')
    assertDenied(write, 'write_file', 'deniedTools')
    const [both] = await gate.execute([{ name: 'read_file' }], { context: { allowedTools: ['*'], deniedTools: ['read_file'] } })
    assertDenied(both, 'read_file', 'deniedTools')
    assert.equal(calls.read_file + calls.write_file, 0)
  })

  it('refuses a needsApproval tool without an approval callback, unless approvedTools lists it', async () => {
    const { gate, calls } = tools()
    const [denied] = await gate.execute([{ name: 'deploy' }])
    assertRefused(denied, 'approval_denied', 'approval:denied',
      'Tool "deploy" needs approval, and this call was not approved: declined: no approval callback is set. Do not retry it unchanged; ask the user, or do something else.')
    assert.deepEqual(marks(denied).slice(-2), ['permission:asked', 'approval:denied'])
    const [other] = await gate.execute([{ name: 'deploy' }], { context: { approvedTools: ['read_file'] } })
    assertRefused(other, 'approval_denied', 'approval:denied')
    assert.equal(calls.deploy, 0)

    const [approved] = await gate.execute([{ name: 'deploy' }], { context: { approvedTools: ['deploy'] } })
    assertSuccess(approved, 'ok')
    assert.equal(marks(approved)[3], 'permission:approved')
    const [glob] = await gate.execute([{ name: 'deploy' }], { context: { approvedTools: ['dep*'] } })
    assertSuccess(glob, 'ok')
    assert.equal(calls.deploy, 2)
  })

  it('approves every call of an approved tool in the turn', async () => {
    const { gate, calls } = tools()
    const results = await gate.execute([{ name: 'deploy' }, { name: 'deploy' }, { name: 'deploy' }], { context: { approvedTools: ['deploy'] } })
    assert.deepEqual(results.map((r) => r.errorKind ?? 'ok'), ['ok', 'ok', 'ok'])
    assert.equal(calls.deploy, 3)
  })

  it('refuses a tool the context may not use before reading its arguments', async () => {
    // Validating them would only teach the model the parameters of a tool it cannot call.
    const { gate, calls } = gateWith([{ name: 'admin', parameters: { type: 'object', properties: { userId: { type: 'integer' } }, required: ['userId'] } }])
    const context = { deniedTools: ['admin'] }
    const results = await gate.execute([
      { name: 'admin', input: { userId: 'x' } },
      { name: 'admin', arguments: '{not json' },
      { name: 'admin', input: [] },
    ], { context })
    for (const r of results) {
      assertDenied(r, 'admin', 'deniedTools')
      assert.ok(!r.error.includes('userId'), r.error)
    }
    assert.equal(calls.admin, 0)
  })

  it('checks the arguments of a needsApproval tool before its approval', async () => {
    const { gate, calls } = gateWith([{ name: 'deploy', needsApproval: true, parameters: { type: 'object', properties: { env: { enum: ['prod', 'dev'] } } } }])
    const [r] = await gate.execute([{ name: 'deploy', input: { env: 'qa' } }])
    assertRefused(r, 'invalid_arguments', 'validate:invalid_arguments', '- /env: must be one of "prod", "dev"')
    assert.equal(calls.deploy, 0)
  })

  it('offers needsApproval tools in definitions whether approved or not', () => {
    const { gate } = tools()
    const names = gate.definitions('anthropic', { context: { approvedTools: [] } }).map((d) => d.name)
    assert.ok(names.includes('deploy'), names.join(','))
  })

  it('refuses a denied tool before asking about approval', async () => {
    const { gate, calls } = tools()
    const [r] = await gate.execute([{ name: 'deploy' }], { context: { deniedTools: ['deploy'], approvedTools: ['deploy'] } })
    assertDenied(r, 'deploy', 'deniedTools')
    assert.equal(calls.deploy, 0)
  })

  it('passes the rest of the context through untouched', async () => {
    const context = { allowedTools: ['who'], userId: 'u1', nested: { role: 'admin' } }
    const { gate } = gateWith([{ name: 'who', handler: (_a, ctx) => ctx.context }])
    const [r] = await gate.execute([{ name: 'who' }], { context })
    assert.deepEqual(r.metadata.structured, context)
  })
})

describe('stations together', () => {
  it('answers each refused call with its own kind while the valid ones run', async () => {
    const { gate, calls } = gateWith([
      { name: 'search', readOnly: true, parameters: { type: 'object', properties: { q: { type: 'string' } }, required: ['q'] } },
      { name: 'admin' },
      { name: 'deploy', needsApproval: true },
    ])
    const results = await gate.execute([
      { id: '1', name: 'serch', input: { q: 'x' } },
      { id: '2', name: 'search', arguments: '{' },
      { id: '3', name: 'search', input: {} },
      { id: '4', name: 'admin' },
      { id: '5', name: 'deploy' },
      { id: '6', name: 'search', input: { q: 'x' } },
    ], { context: { deniedTools: ['admin'] } })
    assert.deepEqual(results.map((r) => r.errorKind ?? 'ok'),
      ['unknown_tool', 'invalid_arguments', 'invalid_arguments', 'unknown_tool', 'approval_denied', 'ok'])
    assert.deepEqual(results.map((r) => r.callId), ['1', '2', '3', '4', '5', '6'])
    assert.deepEqual(results.map((r) => r.retryable), [false, false, false, false, false, false])
    assert.deepEqual(calls, { search: 1, admin: 0, deploy: 0 })
  })
})
