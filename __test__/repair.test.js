'use strict'
// Repair and judge: almost-right calls made right from the schema (and said so), never a valid call changed, never
// a guess; successful but useless results flagged for rollback, with a per-session limit.

const { describe, it } = require('node:test')
const assert = require('node:assert/strict')
const { gateWith, assertFailure, assertSuccess, marks, collectWarnings } = require('./helpers')

const SEARCH = {
  type: 'object',
  additionalProperties: false,
  required: ['query'],
  properties: {
    query: { type: 'string', minLength: 1 },
    max_results: { type: 'integer', minimum: 1, maximum: 50 },
    safe: { type: 'boolean' },
    tags: { type: 'array', items: { type: 'string' } },
    unit: { enum: ['metric', 'imperial'] },
    filter: { type: 'object', additionalProperties: false, properties: { date_range: { type: 'string' }, lang: { type: 'string' } } },
    _from: { type: 'string' },
  },
}

/** An executor whose `search` tool echoes the arguments it got, so that a test sees what the handler saw. */
function echo(options = {}, spec = {}) {
  return gateWith([{ name: 'search', parameters: SEARCH, aliases: { q: 'query' }, handler: (args) => JSON.stringify(args), ...spec }], options)
}

const responsesCall = (args, id = 'c1', name = 'search') => ({ type: 'function_call', call_id: id, name, arguments: args })

describe('repair', () => {
  it('mends malformed argument JSON, says what it changed, and runs the call', async () => {
    const { gate } = echo()
    const results = await gate.execute([
      responsesCall('```json\n{"query": "rust"}\n```', 'fence'),
      responsesCall('{"query": "rust", "tags": ["a", "b",],}', 'commas'),
      responsesCall("{'query': 'rust'}", 'quotes'),
      responsesCall('{query: "rust", max_results: 3}', 'keys'),
      responsesCall('{"query": "rust", "safe": True}', 'python'),
      responsesCall('{"query": "rust", "safe": false', 'cut'),
    ])
    const handled = results.map((r) => JSON.parse(r.output.split('\n')[0]))
    assert.deepEqual(handled, [
      { query: 'rust' }, { query: 'rust', tags: ['a', 'b'] }, { query: 'rust' }, { query: 'rust', max_results: 3 },
      { query: 'rust', safe: true }, { query: 'rust', safe: false },
    ])
    assert.deepEqual(results.map((r) => r.metadata.repairs.map((x) => x.rule)), [
      ['json-code-fence'], ['json-trailing-commas'], ['json-single-quotes'], ['json-unquoted-keys'], ['json-python-literals'], ['json-truncated'],
    ])
    assert.deepEqual(marks(results[1]).slice(0, 3), ['lookup:found', 'parse:mended', 'validate:ok'])
    assert.equal(results[1].output.split('\n')[1], '[arguments adjusted before running: trailing commas in the JSON]')
  })

  it('keeps the parser error for JSON it cannot read, and never completes what was cut off', async () => {
    const { gate, calls } = echo()
    const texts = ['{"query": rust}', '{"query": "a"}{"query": "b"}', '{"query": "ru', '{"query": "rust", "max_results": 5', '{"query": "x", "tags": ["a", "b"']
    const results = await gate.execute(texts.map((t, i) => responsesCall(t, `c${i}`)))
    assertFailure(results[0], 'invalid_arguments', 'The arguments are not valid JSON (expected value at line 1 column 11)')
    assertFailure(results[1], 'invalid_arguments', 'not valid JSON (trailing characters')
    for (const r of results.slice(2)) assertFailure(r, 'invalid_arguments', 'not valid JSON (EOF while parsing')
    assert.equal(calls.search, 0, 'a cut value, a cut number (5 or 50?) and a cut list (more tags?) are not guessed')
  })

  it('maps aliases and near-miss keys to the one property they meant, nested ones too', async () => {
    const { gate } = echo()
    const cases = [
      [{ q: 'a' }, { query: 'a' }, 'alias'],
      [{ query: 'a', maxResults: 2 }, { query: 'a', max_results: 2 }, 'key-case'],
      [{ query: 'a', 'max-results': 2 }, { query: 'a', max_results: 2 }, 'key-case'],
      [{ query: 'a', from: 'x' }, { query: 'a', _from: 'x' }, 'key-underscore'],
      [{ qeury: 'a' }, { query: 'a' }, 'key-typo'],
      [{ query: 'a', filter: { dateRange: '7d' } }, { query: 'a', filter: { date_range: '7d' } }, 'key-case'],
    ]
    const results = await gate.execute(cases.map(([input], i) => ({ id: `k${i}`, name: 'search', input })))
    results.forEach((r, i) => {
      assertSuccess(r)
      assert.deepEqual(JSON.parse(r.output.split('\n')[0]), cases[i][1])
      assert.equal(r.metadata.repairs[0].rule, cases[i][2])
    })
    assert.deepEqual(results[5].metadata.repairs, [{ path: '/filter', before: 'dateRange', after: 'date_range', rule: 'key-case' }])
    assert.deepEqual(marks(results[0]).slice(0, 4), ['lookup:found', 'parse:ok', 'repair:applied', 'validate:ok'])
  })

  it('coerces values to the declared type only where they fail it', async () => {
    const { gate } = echo()
    const [r] = await gate.execute([{ name: 'search', input: { query: 42, max_results: '3.0', safe: 'false', tags: 'rust', unit: 'Metric', filter: '{"lang":"en"}', _from: null } }])
    assertSuccess(r)
    assert.deepEqual(JSON.parse(r.output.split('\n')[0]), { query: '42', max_results: 3, safe: false, tags: ['rust'], unit: 'metric', filter: { lang: 'en' } })
    assert.deepEqual(r.metadata.repairs.map((x) => [x.path, x.rule]), [
      ['/query', 'number-to-string'], ['/max_results', 'string-to-integer'], ['/safe', 'string-to-boolean'], ['/tags', 'scalar-to-array'],
      ['/unit', 'enum-case'], ['/filter', 'json-string'], ['/_from', 'null-omitted'],
    ])
    assert.deepEqual(r.metadata.repairs[1], { path: '/max_results', before: '3.0', after: 3, rule: 'string-to-integer' })
  })

  it('never changes a call that was already valid', async () => {
    const loose = { type: 'object', properties: { zip: { type: 'string' }, limit: { type: 'integer' } } }
    const { gate } = gateWith([{ name: 'geo', parameters: loose, handler: (args) => JSON.stringify(args) }])
    const input = { zip: '02139', limt: 'x', Limit: 3, extra: null }
    const [r] = await gate.execute([{ name: 'geo', input }])
    assertSuccess(r, JSON.stringify(input))
    assert.equal(r.metadata.repairs, undefined)
    assert.ok(!marks(r).includes('repair:applied'))
  })

  it('does not guess: ambiguous keys and doubtful values keep the original error', async () => {
    const two = { type: 'object', additionalProperties: false, properties: { start_date: { type: 'string' }, end_date: { type: 'string' } } }
    const { gate, calls } = gateWith([
      { name: 'search', parameters: SEARCH },
      { name: 'range', parameters: two },
    ])
    const results = await gate.execute([
      { id: 'a', name: 'range', input: { date: '2026-01-01' } },
      { id: 'b', name: 'search', input: { query: 'x', max_results: '3.5' } },
      { id: 'c', name: 'search', input: { query: 'x', safe: 'maybe' } },
      { id: 'd', name: 'search', input: { query: 'x', unit: 'kelvin' } },
      { id: 'e', name: 'search', input: { query: 'x', max_results: 'five' } },
    ])
    assertFailure(results[0], 'invalid_arguments', 'unexpected property "date"')
    assertFailure(results[1], 'invalid_arguments', '/max_results: must be an integer, got a string')
    assertFailure(results[2], 'invalid_arguments', '/safe: must be a boolean, got a string')
    assertFailure(results[3], 'invalid_arguments', '/unit: must be one of')
    assertFailure(results[4], 'invalid_arguments', '/max_results: must be an integer')
    for (const r of results) assert.equal(r.metadata.repairs, undefined)
    assert.deepEqual(calls, { search: 0, range: 0 })
  })

  it('reports the original error when a repair still fails validation', async () => {
    const { gate, calls } = echo()
    // The key is repaired, but max_results is out of range either way: the error names the call as sent.
    const [keyed] = await gate.execute([{ name: 'search', input: { qeury: 'x', max_results: 99 } }])
    assertFailure(keyed, 'invalid_arguments', 'missing required property "query"', '/max_results: must be at most 50')
    assert.equal(keyed.metadata.repairs, undefined)
    // Mended JSON that fails the schema: the parser's error stands.
    const [mended] = await gate.execute([responsesCall('{"query": "", }')])
    assertFailure(mended, 'invalid_arguments', 'The arguments are not valid JSON (trailing comma at line 1 column 15)')
    assert.equal(calls.search, 0)
  })

  it('never echoes a secret-named value in the note, the repairs or the trace', async () => {
    const schema = { type: 'object', properties: { user: { type: 'string' }, password: { type: 'string' } }, required: ['user'] }
    const { gate } = gateWith([{ name: 'login', parameters: schema, handler: () => 'ok' }])
    const [r] = await gate.execute([{ name: 'login', input: { user: 'ada', password: 918273645 } }])
    assertSuccess(r)
    assert.ok(!JSON.stringify(r).includes('918273645'), JSON.stringify(r))
    assert.deepEqual(r.metadata.repairs, [{ path: '/password', before: '[REDACTED:secret-field]', after: '[REDACTED:secret-field]', rule: 'number-to-string' }])
  })

  it('can stay quiet about repairs, or be turned off', async () => {
    const quiet = echo({ repair: { note: false } })
    const [r] = await quiet.gate.execute([{ name: 'search', input: { q: 'a' } }])
    assertSuccess(r, '{"query":"a"}')
    assert.equal(r.metadata.repairs.length, 1)
    const off = echo({ repair: false })
    const [refused] = await off.gate.execute([{ name: 'search', input: { q: 'a' } }, responsesCall('{"query": "a",}', 'c2')])
    assertFailure(refused, 'invalid_arguments', 'unexpected property "q"')
  })

  it('takes good arguments out of the envelope a model put around them, and says so', async () => {
    const { gate, calls } = echo()
    const args = { query: 'rust', max_results: 3 }
    const inner = JSON.stringify(args)
    const results = await gate.execute([
      { id: 'wrapped', name: 'search', input: { arguments: args } },
      { id: 'named', name: 'search', input: { search: args } },
      responsesCall(JSON.stringify({ name: 'search', arguments: inner }), 'echo'),
      responsesCall(`<tool_call>\n{"name": "search", "arguments": ${inner}}\n</tool_call>`, 'tagged'),
      responsesCall(`Arguments: ${inner}\nLet me know if you need more.`, 'prose'),
      responsesCall('{\n  "query": "rust", // what to look for\n  /* at most */ "max_results": 3\n}', 'comments'),
      responsesCall(JSON.stringify(inner), 'once'),
      responsesCall(JSON.stringify(JSON.stringify(inner)), 'twice'),
    ])
    for (const r of results) assert.deepEqual(JSON.parse(r.output.split('\n')[0]), args, r.callId)
    assert.deepEqual(results.map((r) => r.metadata.repairs.map((x) => x.rule)), [
      ['wrapper-key'], ['wrapper-key'], ['call-echo'], ['json-text-around', 'call-echo'], ['json-text-around'], ['json-comments'],
      ['json-double-encoded'], ['json-double-encoded'],
    ])
    assert.deepEqual(results[0].metadata.repairs, [{ path: '', before: 'arguments', after: null, rule: 'wrapper-key' }])
    assert.deepEqual(results[7].metadata.repairs, [{ path: '', before: 2, after: null, rule: 'json-double-encoded' }])
    assert.deepEqual(marks(results[0]).slice(0, 4), ['lookup:found', 'parse:ok', 'repair:applied', 'validate:ok'])
    assert.deepEqual(marks(results[3]).slice(0, 4), ['lookup:found', 'parse:mended', 'repair:applied', 'validate:ok'])
    assert.deepEqual(marks(results[6]).slice(0, 3), ['lookup:found', 'parse:mended', 'validate:ok'])
    assert.deepEqual(results.map((r) => r.output.split('\n')[1]), [
      '[arguments adjusted before running: arguments taken out of the wrapper key "arguments"]',
      '[arguments adjusted before running: arguments taken out of the wrapper key "search"]',
      '[arguments adjusted before running: arguments taken out of the echoed call (its name and arguments)]',
      '[arguments adjusted before running: text around the JSON object dropped; arguments taken out of the echoed call (its name and arguments)]',
      '[arguments adjusted before running: text around the JSON object dropped]',
      '[arguments adjusted before running: comments in the JSON]',
      '[arguments adjusted before running: the arguments were a JSON string of the object: decoded]',
      '[arguments adjusted before running: the arguments were a JSON string of a JSON string of the object: decoded twice]',
    ])
    assert.equal(calls.search, 8)
  })

  it('leaves an envelope alone unless exactly one reading validates, with the original error', async () => {
    const withInput = { type: 'object', $ref: '#/$defs/args', $defs: { args: { required: ['text'], properties: { input: { type: 'object' }, text: { type: 'string' } } } } }
    const { gate, calls } = gateWith([
      { name: 'search', parameters: SEARCH, aliases: { q: 'query' } },
      { name: 'summarize', parameters: withInput },
    ])
    const results = await gate.execute([
      responsesCall('Either {"query": "a"} or {"query": "b"}', 'two'),
      responsesCall('Arguments: {"query": "rust", "filter": {"lang": "en"}', 'cut'),
      { id: 'fails', name: 'search', input: { arguments: { query: '', max_results: 3 } } },
      { id: 'beside', name: 'search', input: { arguments: { query: 'a' }, safe: true } },
      { id: 'other', name: 'search', input: { name: 'fetch', arguments: { query: 'a' } } },
      { id: 'property', name: 'summarize', input: { input: { text: 'x' } } },
      responsesCall(JSON.stringify(JSON.stringify(JSON.stringify('{"query": "a"}'))), 'thrice'),
      responsesCall(JSON.stringify('{"query": ""}'), 'decoded-invalid'),
      responsesCall('[{"query": "a"},', 'cut-list'),
      responsesCall('"name": "fetch", "arguments": {"query": "a"}', 'braceless-echo'),
    ])
    const errors = [
      'The arguments are not valid JSON (expected value at line 1 column 1)', 'The arguments are not valid JSON',
      'unexpected property "arguments"', 'unexpected property "arguments"', 'unexpected properties "name", "arguments"',
      'missing required property "text"', 'but they are a string', 'but they are a string',
      'The arguments are not valid JSON', 'The arguments are not valid JSON',
    ]
    results.forEach((r, i) => assertFailure(r, 'invalid_arguments', errors[i]))
    for (const r of results) assert.equal(r.metadata.repairs, undefined)
    assert.deepEqual(calls, { search: 0, summarize: 0 })
  })

  it('turns envelope repairs off with the rest of repair', async () => {
    const { gate, calls } = echo({ repair: false })
    const results = await gate.execute([
      { id: 'wrapped', name: 'search', input: { arguments: { query: 'a' } } },
      responsesCall('Arguments: {"query": "a"}', 'prose'),
      responsesCall(JSON.stringify('{"query": "a"}'), 'once'),
    ])
    for (const r of results) assertFailure(r, 'invalid_arguments')
    assert.equal(calls.search, 0)
    const { gate: noWrappers } = echo({ repair: { wrappers: false } })
    const [kept, prose] = await noWrappers.execute([{ id: 'w', name: 'search', input: { input: { query: 'a' } } }, responsesCall('Arguments: {"query": "a"}', 'p')])
    assertFailure(kept, 'invalid_arguments', 'unexpected property "input"')
    assertSuccess(prose)
  })

  it('corrects an unknown tool name only when asked, only to a tool the context may use, and says so', async () => {
    const tools = [{ name: 'web_search' }, { name: 'read_file' }, { name: 'delete_file' }]
    const plain = gateWith(tools)
    const [refused] = await plain.gate.execute([{ name: 'web-search' }])
    assertFailure(refused, 'unknown_tool', 'Did you mean "web_search"?')
    const { gate, calls } = gateWith(tools, { repair: { toolNames: true } })
    const [fixed, hidden, typo] = await gate.execute([{ id: 'a', name: 'WebSearch' }, { id: 'b', name: 'Delete-File' }, { id: 'c', name: 'web_serch' }], {
      context: { deniedTools: ['delete_file'] },
    })
    assertSuccess(fixed, 'ok\n[arguments adjusted before running: tool "WebSearch" → "web_search"]')
    assert.equal(fixed.name, 'web_search')
    assert.deepEqual(fixed.metadata.repairs, [{ path: '', before: 'WebSearch', after: 'web_search', rule: 'tool-name' }])
    assert.equal(marks(fixed)[0], 'lookup:corrected')
    assertFailure(hidden, 'unknown_tool')
    assert.ok(!hidden.error.includes('delete_file'), 'a tool the context may not use is never named')
    assertFailure(typo, 'unknown_tool', 'Did you mean "web_search"?')
    assert.deepEqual(calls, { web_search: 1, read_file: 0, delete_file: 0 })
  })

  it('refuses aliases that do not name a property, at registration', () => {
    assert.throws(() => echo({}, { aliases: { q: 'nope' } }), /aliases: "q" must map to the name of a declared property/)
    assert.throws(() => echo({}, { aliases: { query: 'max_results' } }), /"query" is a property itself/)
  })
})

describe('judge: rollbackWhen', () => {
  const serp = (organic) => () => ({ query: 'x', organic })

  it('flags a success that is empty at a pointer, starts with a prefix or matches a pattern', async () => {
    const { gate } = gateWith([
      { name: 'empty', handler: serp([]), rollbackWhen: { emptyAt: '/organic' } },
      { name: 'full', handler: serp([{ title: 't' }]), rollbackWhen: { emptyAt: '/organic' } },
      { name: 'prefixed', handler: () => 'ERROR: quota exceeded', rollbackWhen: [{ startsWith: 'ERROR:' }, { matches: '(?i)no results' }] },
      { name: 'matched', handler: () => 'Sorry, No Results found', rollbackWhen: [{ startsWith: 'ERROR:' }, { matches: '(?i)no results' }] },
      { name: 'failing', handler: () => { throw new Error('down') }, rollbackWhen: { startsWith: 'Error' } },
    ])
    const [empty, full, prefixed, matched, failing] = await gate.execute(['empty', 'full', 'prefixed', 'matched', 'failing'].map((name) => ({ name })))
    assert.deepEqual(empty.rollback, { reason: 'nothing at /organic' })
    assert.equal(marks(empty).at(-1), 'judge:rollback')
    assert.equal(full.rollback, undefined)
    assert.equal(marks(full).at(-1), 'judge:ok')
    assert.deepEqual(prefixed.rollback, { reason: 'the output starts with "ERROR:"' })
    assert.deepEqual(matched.rollback, { reason: 'the output matches /(?i)no results/' })
    assert.equal(failing.rollback, undefined, 'failures are not judged: they already failed')
    assert.equal(empty.success, true, 'a flagged result is still a success')
  })

  it('judges the whole output, before it is cut to fit', async () => {
    const { gate } = gateWith([
      { name: 'long', maxOutputChars: 100, handler: () => `ERROR: ${'x'.repeat(500)}`, rollbackWhen: { startsWith: 'ERROR:' } },
      { name: 'big', maxOutputChars: 100, handler: () => ({ organic: [], ads: 'y'.repeat(500) }), rollbackWhen: { emptyAt: '/organic' } },
    ])
    const [long, big] = await gate.execute([{ name: 'long' }, { name: 'big' }])
    assert.equal(long.truncated, true)
    assert.deepEqual(long.rollback, { reason: 'the output starts with "ERROR:"' })
    assert.deepEqual(big.rollback, { reason: 'nothing at /organic' })
  })

  it('takes a function that judges the returned value', async () => {
    const { gate } = gateWith([
      { name: 'reason', handler: () => ({ hits: 0 }), rollbackWhen: (value) => value.hits === 0 && 'no hits' },
      { name: 'yes', handler: () => 'x', rollbackWhen: () => true },
      { name: 'no', handler: () => 'x', rollbackWhen: (_v, ctx) => ctx.toolName !== 'no' },
    ])
    const [reason, yes, no] = await gate.execute([{ name: 'reason' }, { name: 'yes' }, { name: 'no' }])
    assert.deepEqual(reason.rollback, { reason: 'no hits' })
    assert.deepEqual(yes.rollback, { reason: "the tool's rollbackWhen function flagged the result" })
    assert.equal(no.rollback, undefined)
  })

  it('treats a judge function that throws as no verdict, with a warning', async () => {
    const w = collectWarnings()
    const { gate } = gateWith([{ name: 't', handler: () => 'x', rollbackWhen: () => { throw new Error('oops') } }])
    const [r] = await gate.execute([{ name: 't' }])
    await new Promise((resolve) => setImmediate(resolve))
    w.stop()
    assertSuccess(r, 'x')
    assert.equal(r.rollback, undefined)
    assert.ok(w.warnings.some((x) => /rollbackWhen function of "t" threw: oops/.test(x.message)))
  })

  it('stops raising the flag after the session limit of consecutive rollbacks, until one passes', async () => {
    let organic = []
    const { gate } = gateWith([{ name: 'search', handler: () => ({ organic }), rollbackWhen: { emptyAt: '/organic' } }], { maxConsecutiveRollbacks: 2 })
    const run = async (sessionId) => (await gate.execute([{ name: 'search' }], { context: { sessionId } }))[0]
    const flags = []
    for (let i = 0; i < 3; i++) flags.push((await run('s1')).rollback?.reason ?? 'none')
    assert.deepEqual(flags, ['nothing at /organic', 'nothing at /organic', 'none'])
    const third = await run('s1')
    assert.equal(third.rollback, undefined)
    assert.equal(third.metadata.rollbackSuppressed, true)
    assert.ok((await run('s2')).rollback, 'another session has its own count')
    organic = [1]
    assert.equal((await run('s1')).rollback, undefined)
    organic = []
    assert.ok((await run('s1')).rollback, 'a result that passed starts the count again')
  })

  it('refuses rules it cannot read, at registration', () => {
    assert.throws(() => gateWith([{ name: 't', rollbackWhen: 'empty' }]), /rollbackWhen must be a rule or a list of rules/)
    assert.throws(() => gateWith([{ name: 't', rollbackWhen: { emptyAt: 'organic' } }]), /JSON pointer/)
    assert.throws(() => gateWith([{ name: 't', rollbackWhen: { matches: '(' } }]), /does not compile/)
  })
})
