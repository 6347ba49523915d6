'use strict'
// Registration and the registry's views: programmer errors throw at once and say what to fix.

const { describe, it } = require('node:test')
const assert = require('node:assert/strict')
const { ToolExecutor } = require('..')
const { assertFailure, assertSuccess, gateWith } = require('./helpers')

const ok = () => 'ok'
const NAME_RULE = /use 1 to 64 characters from a-z, A-Z, 0-9, '_' and '-'/

describe('register', () => {
  it('throws on invalid names, naming the name and the rule', () => {
    const gate = new ToolExecutor()
    for (const name of ['', 'a'.repeat(65), 'web search', 'web.search', 'café']) {
      assert.throws(() => gate.register({ name, handler: ok }), (err) => {
        assert.equal(err.name, 'TypeError')
        assert.ok(err.message.includes(`invalid tool name "${name}"`), err.message)
        assert.match(err.message, NAME_RULE)
        return true
      })
    }
    // The limits themselves are accepted.
    gate.register({ name: 'a'.repeat(64), handler: ok })
    gate.register({ name: 'A-z_09', handler: ok })
    assert.deepEqual(gate.list().map((t) => t.name), ['a'.repeat(64), 'A-z_09'])
  })

  it('throws on a schema that does not compile, saying which tool and what is wrong', () => {
    const gate = new ToolExecutor()
    assert.throws(
      () => gate.register({ name: 'typo', parameters: { type: 'object', properties: { a: { type: 'strin' } } }, handler: ok }),
      { name: 'TypeError', message: /^tool "typo": parameters is not a valid JSON Schema: .*"strin"/ },
    )
    assert.throws(
      () => gate.register({ name: 'regex', parameters: { type: 'object', properties: { a: { type: 'string', pattern: '(' } } }, handler: ok }),
      /tool "regex": parameters is not a valid JSON Schema/,
    )
    assert.deepEqual(gate.list(), [], 'nothing half-registered')
  })

  it('resolves local $refs, and refuses at registration a $ref it cannot resolve', async () => {
    const gate = new ToolExecutor()
    gate.register({ name: 'local', handler: ok, parameters: {
      type: 'object', $defs: { path: { type: 'string' } }, properties: { from: { $ref: '#/$defs/path' } },
    } })
    const [r] = await gate.execute([{ name: 'local', input: { from: [1] } }])
    assertFailure(r, 'invalid_arguments', '- /from: must be a string, got an array')
    assert.throws(() => gate.register({ name: 'dangling', handler: ok, parameters: { type: 'object', properties: { a: { $ref: '#/$defs/nope' } } } }),
      { name: 'TypeError', message: /^tool "dangling": parameters is not a valid JSON Schema: .*\/\$defs\/nope/ })
    // No network at registration: a remote $ref is refused, not fetched.
    assert.throws(() => gate.register({ name: 'remote', handler: ok, parameters: { type: 'object', properties: { a: { $ref: 'https://example.com/s.json' } } } }),
      { name: 'TypeError', message: /^tool "remote": parameters is not a valid JSON Schema: .*https:\/\/example\.com\/s\.json/ })
  })

  it('refuses a schema whose validation could explode, naming the construct; one within the bound answers a bad call', async () => {
    // Each level `anyOf: [{$ref: next}, {$ref: next}]`: a value that matches nothing is tried along 2^levels paths.
    const chain = (levels) => {
      const $defs = { [`l${levels}`]: { type: 'string' } }
      for (let i = 0; i < levels; i++) $defs[`l${i}`] = { anyOf: [{ $ref: `#/$defs/l${i + 1}` }, { $ref: `#/$defs/l${i + 1}` }] }
      return { type: 'object', properties: { q: { $ref: '#/$defs/l0' } }, $defs }
    }
    const gate = new ToolExecutor()
    for (const levels of [20, 40]) {
      assert.throws(() => gate.register({ name: 'chain', parameters: chain(levels), handler: ok }), (err) => {
        assert.equal(err.name, 'TypeError')
        assert.match(err.message, /tool "chain": parameters cannot be used: checking one value against it could take more than 2000 evaluations/)
        assert.match(err.message, /the anyOf at #\/\$defs\/l\d+ lead to more subschemas than that, or to the same ones many times over/)
        return true
      })
    }
    assert.throws(() => gate.register({ name: 'chained_output', outputSchema: chain(20), handler: ok }), /outputSchema cannot be used/)
    assert.deepEqual(gate.list(), [])
    gate.register({ name: 'chain', parameters: chain(8), handler: ok })
    const [result] = await gate.execute([{ name: 'chain', arguments: { q: 5 } }])
    assertFailure(result, 'invalid_arguments')
    assert.match(result.error, /\/q: does not match any of the allowed forms/)
  })

  it('throws on a schema whose root is not an object schema', () => {
    const gate = new ToolExecutor()
    for (const parameters of [{ type: 'string' }, { type: 'array', items: {} }, {}]) {
      assert.throws(() => gate.register({ name: 'root', parameters, handler: ok }), {
        name: 'TypeError',
        message: /^tool "root": parameters must be a JSON Schema of an object \(\{ type: 'object', properties: \{…\} \}\)/,
      }, JSON.stringify(parameters))
    }
    for (const [parameters, got] of [['object', 'a string'], [[], 'an array'], [true, 'a boolean']]) {
      assert.throws(() => gate.register({ name: 'root', parameters, handler: ok }), {
        name: 'TypeError',
        message: `tool "root": parameters must be a JSON Schema (a plain object such as { type: 'object', properties: {…} }) or a Standard Schema (zod 4, valibot, ArkType); got ${got}`,
      }, JSON.stringify(parameters))
    }
    assert.deepEqual(gate.list(), [])
  })

  it('spells out type: object when the schema only implies it', () => {
    const gate = new ToolExecutor()
    gate.register({ name: 'implied', parameters: { properties: { a: { type: 'string' } } }, handler: ok })
    const expected = { type: 'object', properties: { a: { type: 'string' } } }
    assert.deepEqual(gate.list()[0].parameters, expected)
    assert.deepEqual(gate.definitions('anthropic')[0].input_schema, expected)
  })

  it('throws on a duplicate name; replace: true swaps in the new handler', async () => {
    const gate = new ToolExecutor()
    gate.register({ name: 'dup', handler: () => 'first' })
    assert.throws(() => gate.register({ name: 'dup', handler: () => 'second' }), {
      name: 'TypeError',
      message: 'a tool named "dup" is already registered: pick another name, unregister it first, or pass replace: true',
    })
    assertSuccess((await gate.execute([{ name: 'dup' }]))[0], 'first')
    gate.register({ name: 'dup', description: 'new', handler: () => 'third', replace: true })
    assertSuccess((await gate.execute([{ name: 'dup' }]))[0], 'third')
    assert.deepEqual(gate.list().map((t) => [t.name, t.description]), [['dup', 'new']], 'replaced in place, not added')
  })

  it('keeps the old tool when a replacement is refused', async () => {
    const gate = new ToolExecutor()
    gate.register({ name: 'keep', handler: () => 'old' })
    assert.throws(() => gate.register({ name: 'keep', parameters: { type: 'string' }, handler: () => 'new', replace: true }))
    assertSuccess((await gate.execute([{ name: 'keep' }]))[0], 'old')
  })

  it('throws a TypeError when the handler is missing or not a function', () => {
    const gate = new ToolExecutor()
    assert.throws(() => gate.register({ name: 'nohandler' }), {
      name: 'TypeError',
      message: 'register(spec): tool "nohandler" needs a handler function (args, ctx) => result',
    })
    assert.throws(() => gate.register({ name: 'nohandler', handler: 'run' }), { name: 'TypeError', message: /needs a handler function/ })
    assert.throws(() => gate.register(null), { name: 'TypeError', message: 'register(spec): spec must be an object' })
    assert.deepEqual(gate.list(), [])
  })

  it('throws on an unknown spec field (a typo), listing the known ones', () => {
    const gate = new ToolExecutor()
    assert.throws(() => gate.register({ name: 'typo', readonly: true, handler: ok }), (err) => {
      assert.equal(err.name, 'TypeError')
      assert.match(err.message, /^tool "typo": unknown option "readonly" \(known: .*\breadOnly\b.*\)$/)
      return true
    })
  })

  it('throws on tool limits that cannot work', () => {
    const gate = new ToolExecutor()
    assert.throws(() => gate.register({ name: 't', timeoutMs: 0, handler: ok }), { name: 'TypeError', message: 'tool "t": timeoutMs must be a positive number' })
    assert.throws(() => gate.register({ name: 't', maxOutputChars: 0, handler: ok }), { name: 'TypeError', message: 'tool "t": maxOutputChars must be a positive number' })
    assert.throws(() => gate.register({ name: 't', timeoutMs: -1, handler: ok }), { name: 'TypeError', message: /^invalid tool spec: / })
    assert.deepEqual(gate.list(), [])
  })

  it('returns the executor, so registrations chain', () => {
    const gate = new ToolExecutor()
    assert.equal(gate.register({ name: 'a', handler: ok }).register({ name: 'b', handler: ok }), gate)
    assert.deepEqual(gate.list().map((t) => t.name), ['a', 'b'])
  })
})

describe('executor options', () => {
  it('throws on values that cannot work', () => {
    assert.throws(() => new ToolExecutor({ concurrency: 0 }), { name: 'TypeError', message: 'concurrency must be a positive number' })
    assert.throws(() => new ToolExecutor({ defaultTimeoutMs: 0 }), { name: 'TypeError', message: 'defaultTimeoutMs must be a positive number' })
    assert.throws(() => new ToolExecutor({ maxOutputChars: 0 }), { name: 'TypeError', message: 'maxOutputChars must be a positive number' })
    assert.throws(() => new ToolExecutor({ defaultTimeoutMs: -5 }), { name: 'TypeError', message: /^invalid ToolExecutor options: / })
  })

  it('throws on limits that are not integers', () => {
    assert.throws(() => new ToolExecutor({ concurrency: 2.5 }), /invalid ToolExecutor options/)
    assert.throws(() => new ToolExecutor({ defaultTimeoutMs: '100' }), /invalid ToolExecutor options/)
    assert.throws(() => new ToolExecutor().register({ name: 't', timeoutMs: 1.5, handler: ok }), /invalid tool spec/)
  })

  it('throws a TypeError on an unknown option, listing the known ones', () => {
    assert.throws(() => new ToolExecutor({ concurency: 2 }), {
      name: 'TypeError',
      message: /^ToolExecutor options: unknown option "concurency" \(known: .*\bconcurrency\b.*\)$/,
    })
    assert.throws(() => new ToolExecutor(null), { name: 'TypeError', message: 'new ToolExecutor(options): options must be an object' })
  })
})

describe('unregister', () => {
  it('returns true then false, and the tool is then unknown', async () => {
    const gate = new ToolExecutor()
    gate.register({ name: 'gone', handler: ok }).register({ name: 'stays', handler: ok })
    assert.equal(gate.unregister('gone'), true)
    assert.equal(gate.unregister('gone'), false)
    assert.equal(gate.unregister('never_was'), false)
    assert.deepEqual(gate.list().map((t) => t.name), ['stays'])
    const [r] = await gate.execute([{ name: 'gone' }])
    assertFailure(r, 'unknown_tool', 'There is no tool named "gone".', 'Available tools: stays.')
    // The name is free again.
    gate.register({ name: 'gone', handler: () => 'back' })
    assertSuccess((await gate.execute([{ name: 'gone' }]))[0], 'back')
  })
})

describe('list and definitions', () => {
  const SCHEMA = { type: 'object', properties: { q: { type: 'string' } }, required: ['q'] }
  const EMPTY = { type: 'object', properties: {} }

  function registry() {
    const gate = new ToolExecutor({ defaultTimeoutMs: 1234, maxTimeoutMs: 5000, maxOutputChars: 999 })
    gate.register({ name: 'search', description: 'Search the web', parameters: SCHEMA, readOnly: true, idempotent: true, handler: ok })
    gate.register({ name: 'deploy', needsApproval: true, timeoutMs: 60_000, maxOutputChars: 50, handler: ok })
    gate.register({ name: 'read_file', description: 'Read a file', handler: ok })
    return gate
  }

  it('list() gives every tool in registration order with its effective limits', () => {
    // The executor's default retry policy (LangChain's defaults: 2 retries, doubling from 1 s, capped at 60 s).
    const retry = { maxRetries: 2, initialDelayMs: 1000, backoffFactor: 2, maxDelayMs: 60000, maxElapsedMs: 120000, onTimeout: false }
    assert.deepEqual(registry().list(), [
      { name: 'search', description: 'Search the web', parameters: SCHEMA, readOnly: true, idempotent: true, needsApproval: false, risk: 'read', untrusted: false, timeoutMs: 1234, maxOutputChars: 999, retry },
      // A tool's own timeout is capped by maxTimeoutMs.
      { name: 'deploy', description: '', parameters: EMPTY, readOnly: false, idempotent: false, needsApproval: true, risk: 'write', untrusted: false, timeoutMs: 5000, maxOutputChars: 50, retry },
      { name: 'read_file', description: 'Read a file', parameters: EMPTY, readOnly: false, idempotent: false, needsApproval: false, risk: 'write', untrusted: false, timeoutMs: 1234, maxOutputChars: 999, retry },
    ])
  })

  it('list({ context }) gives only the tools the context may use', () => {
    const gate = registry()
    assert.deepEqual(gate.list({ context: { allowedTools: ['read_*', 'search'] } }).map((t) => t.name), ['search', 'read_file'])
    assert.deepEqual(gate.list({ context: { deniedTools: ['s*'] } }).map((t) => t.name), ['deploy', 'read_file'])
  })

  it("definitions('openai-responses')", () => {
    assert.deepEqual(registry().definitions('openai-responses'), [
      // strict: false, since Responses reads a missing `strict` as strict mode (every parameter required).
      { type: 'function', name: 'search', description: 'Search the web', parameters: SCHEMA, strict: false },
      { type: 'function', name: 'deploy', description: '', parameters: EMPTY, strict: false },
      { type: 'function', name: 'read_file', description: 'Read a file', parameters: EMPTY, strict: false },
    ])
  })

  it("definitions('openai-chat')", () => {
    assert.deepEqual(registry().definitions('openai-chat'), [
      { type: 'function', function: { name: 'search', description: 'Search the web', parameters: SCHEMA } },
      { type: 'function', function: { name: 'deploy', description: '', parameters: EMPTY } },
      { type: 'function', function: { name: 'read_file', description: 'Read a file', parameters: EMPTY } },
    ])
  })

  it("definitions('anthropic')", () => {
    assert.deepEqual(registry().definitions('anthropic'), [
      { name: 'search', description: 'Search the web', input_schema: SCHEMA },
      { name: 'deploy', description: '', input_schema: EMPTY },
      { name: 'read_file', description: 'Read a file', input_schema: EMPTY },
    ])
  })

  it("definitions('ai-sdk') gives provider-level function tools", () => {
    assert.deepEqual(registry().definitions('ai-sdk'), [
      { type: 'function', name: 'search', description: 'Search the web', inputSchema: SCHEMA },
      { type: 'function', name: 'deploy', description: '', inputSchema: EMPTY },
      { type: 'function', name: 'read_file', description: 'Read a file', inputSchema: EMPTY },
    ])
  })

  it("definitions('ai-sdk', { jsonSchema }) gives the tools record, each schema passed through the helper", () => {
    const seen = []
    const jsonSchema = (schema) => {
      seen.push(schema)
      return { wrapped: schema }
    }
    const tools = registry().definitions('ai-sdk', { jsonSchema })
    assert.deepEqual(tools, {
      search: { description: 'Search the web', inputSchema: { wrapped: SCHEMA } },
      deploy: { description: '', inputSchema: { wrapped: EMPTY } },
      read_file: { description: 'Read a file', inputSchema: { wrapped: EMPTY } },
    })
    assert.equal(seen.length, 3)
    assert.equal(Object.hasOwn(tools.search, 'execute'), false, 'toolgate runs the tools, the SDK must not')
  })

  it('definitions(format, { context }) leaves out the tools the context may not use', () => {
    const gate = registry()
    assert.deepEqual(gate.definitions('anthropic', { context: { deniedTools: ['deploy'] } }).map((d) => d.name), ['search', 'read_file'])
    assert.deepEqual(gate.definitions('openai-chat', { context: { allowedTools: ['deploy'] } }).map((d) => d.function.name), ['deploy'])
  })

  it('definitions(format) throws a TypeError on an unknown format, listing the known ones', () => {
    assert.throws(() => registry().definitions('vertex'), {
      name: 'TypeError',
      message: 'definitions(format): format must be one of openai-responses, openai-chat, anthropic, ai-sdk, gemini, bedrock; got vertex',
    })
    assert.throws(() => registry().definitions(), { name: 'TypeError', message: /got undefined$/ })
  })
})

describe("definitions('gemini'): Gemini's schema dialect", () => {
  it('converts what converts: types in capitals, counts as strings, $defs written in place, oneOf as anyOf', () => {
    const gate = new ToolExecutor()
    gate.register({
      name: 'book',
      description: 'Books a table',
      parameters: {
        $schema: 'https://json-schema.org/draft/2020-12/schema',
        type: 'object',
        properties: {
          guests: { type: 'integer', minimum: 1, maximum: 12, multipleOf: 1 },
          name: { type: ['string', 'null'], minLength: 1 },
          at: { $ref: '#/$defs/slot' },
          seat: { oneOf: [{ const: 'inside' }, { const: 'terrace' }] },
          tags: { type: 'array', items: { type: 'string' }, maxItems: 3, uniqueItems: true },
        },
        required: ['guests', 'at'],
        additionalProperties: false,
        $defs: { slot: { type: 'object', properties: { day: { type: 'string', format: 'date' } }, required: ['day'] } },
      },
      handler: () => 'booked',
    })
    gate.register({ name: 'ping', handler: () => 'pong' })
    assert.deepEqual(gate.definitions('gemini'), [
      {
        name: 'book',
        description: 'Books a table',
        parameters: {
          type: 'OBJECT',
          properties: {
            guests: { type: 'INTEGER', minimum: 1, maximum: 12 },
            name: { type: 'STRING', nullable: true, minLength: '1' },
            at: { type: 'OBJECT', properties: { day: { type: 'STRING', format: 'date' } }, required: ['day'] },
            seat: { anyOf: [{ type: 'STRING', enum: ['inside'] }, { type: 'STRING', enum: ['terrace'] }] },
            tags: { type: 'ARRAY', items: { type: 'STRING' }, maxItems: '3' },
          },
          required: ['guests', 'at'],
        },
      },
      { name: 'ping' },
    ])
  })

  it('throws a TypeError naming the tool, the keyword and where, for what Gemini cannot be sent', () => {
    const refused = (parameters, message) => {
      const gate = new ToolExecutor()
      gate.register({ name: 'search', handler: () => 'ok' })
      gate.register({ name: 'lookup', parameters, handler: () => 'ok' })
      assert.throws(() => gate.definitions('gemini'), { name: 'TypeError', message })
      assert.equal(gate.definitions('bedrock').length, 2, 'other formats take the same schema')
    }
    refused({ type: 'object', properties: { tags: { type: 'object', additionalProperties: { type: 'string' } } } },
      'tool "lookup": Gemini cannot take "additionalProperties" as a schema (at /properties/tags): it has no map type; list the properties, or take an array of { key, value } objects')
    refused({ type: 'object', properties: { at: { prefixItems: [{ type: 'number' }, { type: 'number' }] } } }, /^tool "lookup": .*"prefixItems".*\(at \/properties\/at\)/)
    refused({ type: 'object', properties: { node: { $ref: '#' } } }, /^tool "lookup": .*"\$ref".*cannot refer to itself/)
    refused({ type: 'object', properties: { q: { not: { type: 'null' } } } }, /^tool "lookup": .*"not"/)
    const digit = new ToolExecutor()
    digit.register({ name: '3d_render', handler: () => 'ok' })
    assert.throws(() => digit.definitions('gemini'), {
      name: 'TypeError',
      message: `tool "3d_render": Gemini takes only function names that start with a letter or '_'; rename the tool`,
    })
  })

  it('leaves out the tools a context may not use before converting, so a hidden tool cannot refuse the list', () => {
    const gate = new ToolExecutor()
    gate.register({ name: 'search', readOnly: true, handler: () => 'ok' })
    gate.register({ name: 'admin', parameters: { type: 'object', properties: { q: { not: {} } } }, handler: () => 'ok' })
    assert.deepEqual(gate.definitions('gemini', { context: { deniedTools: ['admin'] } }), [{ name: 'search' }])
  })
})

describe('execute: programmer errors', () => {
  // index.d.ts: execute "rejects (never throws synchronously)" for programmer errors, so `await` in `try` and
  // `.catch` both see them.
  it('rejects with a TypeError, without throwing synchronously, when calls is not an array', async () => {
    const gate = new ToolExecutor()
    let pending
    assert.doesNotThrow(() => {
      pending = gate.execute('not an array')
    })
    await assert.rejects(pending, { name: 'TypeError', message: 'execute(calls): calls must be an array of tool calls, got string' })
    await assert.rejects(gate.execute({ name: 'x' }), { name: 'TypeError', message: /got object$/ })
    await assert.rejects(gate.execute(), { name: 'TypeError', message: /got undefined$/ })
  })

  it('rejects with a TypeError when signal is not an AbortSignal, running nothing', async () => {
    const { gate, calls } = gateWith([{ name: 'a' }])
    await assert.rejects(gate.execute([{ name: 'a' }], { signal: { aborted: false } }), {
      name: 'TypeError',
      message: 'execute(calls, { signal }): signal must be an AbortSignal',
    })
    assert.equal(calls.a, 0)
  })

  it('rejects with a TypeError when the context or its tool lists are malformed, running nothing', async () => {
    const { gate, calls } = gateWith([{ name: 'a' }])
    await assert.rejects(gate.execute([{ name: 'a' }], { context: 'admin' }), {
      name: 'TypeError',
      message: 'execute(calls, { context }): context must be an object',
    })
    await assert.rejects(gate.execute([{ name: 'a' }], { context: { allowedTools: 'a' } }), {
      name: 'TypeError',
      message: 'context.allowedTools must be an array of tool names',
    })
    await assert.rejects(gate.execute([{ name: 'a' }], { context: { deniedTools: [1] } }), { message: 'context.deniedTools must be an array of tool names' })
    await assert.rejects(gate.execute([{ name: 'a' }], { context: { approvedTools: null } }), { message: 'context.approvedTools must be an array of tool names' })
    assert.equal(calls.a, 0)
  })
})
