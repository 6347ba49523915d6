'use strict'
// toolgate/mcp serving a gate, against the real @modelcontextprotocol/sdk on the other side: its Client over stdio
// (the fixture server in a child process), its Streamable HTTP client against the handler mounted in node:http,
// raw JSON-RPC over fetch where the protocol version is the subject, and the MCP Inspector's CLI. What a client
// reads is asserted field by field, in the gate's own wording.

const { describe, it, after } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const http = require('node:http')
const os = require('node:os')
const path = require('node:path')
const { spawn } = require('node:child_process')
const { Client } = require('@modelcontextprotocol/sdk/client/index.js')
const { StdioClientTransport } = require('@modelcontextprotocol/sdk/client/stdio.js')
const { StreamableHTTPClientTransport } = require('@modelcontextprotocol/sdk/client/streamableHttp.js')
const { StreamableHTTPServerTransport } = require('@modelcontextprotocol/sdk/server/streamableHttp.js')
const { InMemoryTransport } = require('@modelcontextprotocol/sdk/inMemory.js')
const { ElicitRequestSchema, ToolListChangedNotificationSchema } = require('@modelcontextprotocol/sdk/types.js')
const { ToolExecutor } = require('..')
const { serveMcp, mcpHttpHandler } = require('toolgate/mcp')
const { fixtureGate, SERVED_CONTEXT, PNG, TABLE_ROWS } = require('./fixtures/mcp-gate-server.js')
const { PACKAGE_DIR, deferred } = require('./helpers')

const FIXTURE = path.join(__dirname, 'fixtures', 'mcp-gate-server.js')
// The CLI proper: its `cli.js` launcher re-spawns it with whatever `node` is on PATH, not this Node.
const INSPECTOR_CLI = path.join(PACKAGE_DIR, 'node_modules', '@modelcontextprotocol', 'inspector-cli', 'build', 'index.js')
const CLIENT_INFO = { name: 'serve-test', version: '0.0.1' }
// The conformance suite needs Node 22 or later (fs.globSync): under Node 20 it runs on the dev dependencies' Node 22.
const CONFORMANCE_NODE = Number(process.versions.node.split('.')[0]) >= 22 ? process.execPath : path.join(PACKAGE_DIR, 'node_modules', 'node22', 'bin', 'node')

/** Every tool of the fixture but `secret`, which the served context denies, in registration order. */
const LISTED = ['add', 'slow', 'release', 'deploy', 'wait_for_abort', 'aborts_seen', 'chart', 'boom', 'report', 'table', 'whoami']

const text = (result) => result.content[0].text

/** An `isError` result: its kind and retryability in `_meta`, and exactly this text. */
function assertError(result, kind, wording) {
  assert.equal(result.isError, true, JSON.stringify(result))
  assert.deepEqual(result._meta, { 'toolgate/errorKind': kind, 'toolgate/retryable': false })
  assert.deepEqual(result.content, [{ type: 'text', text: `Error (${kind}): ${wording}` }])
  assert.equal('structuredContent' in result, false)
}

/** An SDK Client declaring `capabilities`, answering elicitation requests with `onElicit`. */
function newClient({ capabilities = {}, onElicit } = {}) {
  const client = new Client(CLIENT_INFO, { capabilities })
  if (onElicit) client.setRequestHandler(ElicitRequestSchema, onElicit)
  return client
}

/** Runs `fn(client)` with an SDK Client connected over stdio to a fresh fixture server, closed afterwards. */
async function withStdioClient(fn, clientOptions) {
  const client = newClient(clientOptions)
  await client.connect(new StdioClientTransport({ command: process.execPath, args: [FIXTURE] }))
  try {
    return await fn(client)
  } finally {
    await client.close()
  }
}

/**
 * Runs `fn({ url, handler, connect })` with `mcpHttpHandler(gate, options)` over the fixture's gate mounted in a
 * node:http server on 127.0.0.1; `connect(clientOptions)` gives an SDK Client over Streamable HTTP. Everything
 * closes afterwards.
 */
async function withHttp(options, fn) {
  const gate = fixtureGate()
  const handler = mcpHttpHandler(gate, { context: SERVED_CONTEXT, ...options })
  const server = http.createServer((req, res) => {
    handler(req, res).catch((err) => {
      res.writeHead(500).end(`the handler rejected: ${err?.stack ?? err}`)
    })
  })
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
  const url = new URL(`http://127.0.0.1:${server.address().port}/mcp`)
  const clients = []
  const connect = async (clientOptions) => {
    const transport = new StreamableHTTPClientTransport(url)
    const client = newClient(clientOptions)
    // A session the server ended makes the transport's SSE stream fail: expected in these tests, not a failure.
    client.onerror = () => {}
    clients.push(client)
    await client.connect(transport)
    return { client, transport }
  }
  try {
    return await fn({ url, handler, connect })
  } finally {
    await Promise.all(clients.map((client) => client.close()))
    await handler.close()
    server.closeAllConnections()
    await new Promise((resolve) => server.close(resolve))
    await gate.close()
  }
}

/** POSTs one raw JSON-RPC message as a Streamable HTTP client would (node:http, so that `headers` may set Host too);
 * the reply parsed from JSON or from SSE. */
function post(url, message, headers = {}) {
  return new Promise((resolve, reject) => {
    const request = http.request(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers },
    }, (response) => {
      let body = ''
      response.setEncoding('utf8').on('data', (chunk) => { body += chunk }).on('error', reject).on('end', () => {
        const sse = (response.headers['content-type'] ?? '').startsWith('text/event-stream')
        // An SSE reply is `event: message\ndata: {...}`: the JSON-RPC message is its data line.
        const json = sse ? body.split('\n').find((line) => line.startsWith('data: '))?.slice('data: '.length) : body
        resolve({ status: response.statusCode, sessionId: response.headers['mcp-session-id'] ?? null, reply: json ? JSON.parse(json) : undefined })
      })
    })
    request.on('error', reject).end(JSON.stringify(message))
  })
}

const initialize = (protocolVersion) => ({
  jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion, capabilities: {}, clientInfo: CLIENT_INFO },
})

/** Runs a Node script with `args` under `node` (default: this Node); resolves once it exits, killed after 20 s. */
function runScript(script, args, { node = process.execPath, cwd = __dirname } = {}) {
  return new Promise((resolve, reject) => {
    const child = spawn(node, [script, ...args], { cwd, stdio: ['ignore', 'pipe', 'pipe'] })
    let stdout = ''
    let stderr = ''
    child.stdout.setEncoding('utf8').on('data', (d) => { stdout += d })
    child.stderr.setEncoding('utf8').on('data', (d) => { stderr += d })
    const timer = setTimeout(() => child.kill('SIGKILL'), 20_000)
    child.on('error', reject)
    child.on('close', (code, signal) => {
      clearTimeout(timer)
      resolve({ code: code ?? signal, stdout, stderr })
    })
  })
}

/** Runs the MCP Inspector's CLI against the fixture over stdio; resolves to its parsed JSON stdout. */
async function inspect(...cliArgs) {
  // The CLI looks for its package.json at `../package.json` from its working directory.
  const { code, stdout, stderr } = await runScript(INSPECTOR_CLI, [process.execPath, FIXTURE, ...cliArgs])
  if (code !== 0) throw new Error(`the inspector exited with ${code}: ${stderr}`)
  return JSON.parse(stdout)
}

/** Runs one server scenario of the MCP conformance suite against `url`; resolves to its exit code, its output and
 * the checks it recorded. */
async function conformance(scenario, url) {
  const manifest = require.resolve('@modelcontextprotocol/conformance/package.json')
  const cli = path.join(path.dirname(manifest), require(manifest).bin.conformance)
  const output = fs.mkdtempSync(path.join(os.tmpdir(), 'toolgate-conformance-'))
  try {
    const run = await runScript(cli, ['server', '--url', url.href, '--scenario', scenario, '-o', output], { node: CONFORMANCE_NODE })
    const [folder] = fs.readdirSync(output)
    const checks = folder === undefined ? [] : JSON.parse(fs.readFileSync(path.join(output, folder, 'checks.json'), 'utf8'))
    return { ...run, checks }
  } finally {
    fs.rmSync(output, { recursive: true, force: true })
  }
}

describe('toolgate/mcp serveMcp over stdio: tools/list', () => {
  it("lists the context's tools with their schemas, and annotations from their declarations", async () => {
    await withStdioClient(async (client) => {
      assert.deepEqual(client.getServerVersion(), { name: 'gate-fixture', version: '1.2.3' })
      assert.deepEqual(client.getServerCapabilities().tools, { listChanged: true })

      const { tools } = await client.listTools()
      assert.deepEqual(tools.map((tool) => tool.name), LISTED)
      const byName = Object.fromEntries(tools.map((tool) => [tool.name, tool]))
      assert.deepEqual(byName.add, {
        name: 'add',
        title: 'Add numbers',
        description: 'Adds two numbers.',
        inputSchema: { type: 'object', properties: { a: { type: 'number' }, b: { type: 'number' } }, required: ['a', 'b'], additionalProperties: false },
        outputSchema: { type: 'object', properties: { sum: { type: 'number' } }, required: ['sum'] },
        annotations: { title: 'Add numbers', readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
      })
      // risk 'destructive' → destructiveHint; untrusted → openWorldHint; no outputSchema → none listed.
      assert.deepEqual(byName.deploy.annotations, { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: false })
      assert.deepEqual(byName.report.annotations, { readOnlyHint: true, destructiveHint: false, idempotentHint: false, openWorldHint: true })
      assert.deepEqual(byName.boom, {
        name: 'boom',
        description: 'Always throws.',
        inputSchema: { type: 'object', properties: {}, additionalProperties: false },
        annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: false },
      })
    })
  })
})

describe('toolgate/mcp serveMcp over stdio: tools/call', () => {
  it('answers a plain-object output with structuredContent beside its text', async () => {
    await withStdioClient(async (client) => {
      assert.deepEqual(await client.callTool({ name: 'add', arguments: { a: 1, b: 2 } }), {
        content: [{ type: 'text', text: '{"sum":3}' }],
        structuredContent: { sum: 3 },
      })
      // Context as given to serveMcp: a static object, which carries no session id.
      assert.deepEqual((await client.callTool({ name: 'whoami', arguments: {} })).structuredContent, { sessionId: null })
    })
  })

  it("answers every failure as an isError result in the gate's wording, its kind in _meta", async () => {
    await withStdioClient(async (client) => {
      assertError(await client.callTool({ name: 'add', arguments: { a: 'x' } }), 'invalid_arguments',
        'The arguments do not match the parameters of "add" (2 problems):\n- (arguments): missing required property "b"\n'
        + '- /a: must be a number, got a string\nFix these and call the tool again.')
      // The tools it suggests are those the context may use: never `secret`.
      assertError(await client.callTool({ name: 'nope', arguments: {} }), 'unknown_tool',
        `There is no tool named "nope". Available tools: ${LISTED.join(', ')}. Call one of these by its exact name.`)
      assertError(await client.callTool({ name: 'boom', arguments: {} }), 'handler_error', 'Tool "boom" failed: Error: kaput')
    })
  })

  it('answers the tool the served context hides as a tool that does not exist, as it answers any other name', async () => {
    await withStdioClient(async (client) => {
      const hidden = await client.callTool({ name: 'secret', arguments: {} })
      const absent = await client.callTool({ name: 'no_such_tool', arguments: {} })
      assertError(hidden, 'unknown_tool', `There is no tool named "secret". Available tools: ${LISTED.join(', ')}. Call one of these by its exact name.`)
      assert.equal(text(hidden), text(absent).replace('no_such_tool', 'secret'), 'nothing tells the client it exists')
    })
  })

  it("passes a handler's image as image content after the text", async () => {
    await withStdioClient(async (client) => {
      assert.deepEqual(await client.callTool({ name: 'chart', arguments: {} }), {
        content: [{ type: 'text', text: '[image 1: image/png, 70 bytes]' }, { type: 'image', data: PNG, mimeType: 'image/png' }],
      })
    })
  })

  it('gives a truncated output without its structure, which would undo the truncation', async () => {
    await withStdioClient(async (client) => {
      const result = await client.callTool({ name: 'report', arguments: {} })
      assert.equal(result.isError, undefined)
      assert.equal('structuredContent' in result, false)
      assert.equal(result.content.length, 1)
      assert.match(text(result), /\[Output too long for the context: 211 characters of JSON\. The whole output is saved in /)
      assert.match(text(result), /\{"text":"x{16}… \[184 more characters\]"\}/)
      assert.match(text(result), /^<untrusted-data source="report" /) // untrusted: fenced as data
    })
  })

  it('gives a truncated output whose tool declares an object outputSchema its whole structure, valid for that schema', async () => {
    await withStdioClient(async (client) => {
      // Listed first, as clients do: the SDK's Client then checks structuredContent against the outputSchema it
      // listed, and a cut structure ({"rows":[0, …, 11, "… 88 more items"]}) fails it: callTool rejects.
      await client.listTools()
      const result = await client.callTool({ name: 'table', arguments: {} })
      assert.match(text(result), /^\[Output too long for the context: 300 characters of JSON\./)
      assert.deepEqual(result.structuredContent, { rows: TABLE_ROWS })
    })
  })
})

describe('toolgate/mcp serveMcp over stdio: progress and cancellation', () => {
  it('redacts the messages of progress notifications, as everything the client reads', async () => {
    const token = `ghp_${'Zq4R8sT2vW6xY1bN3mK5pL7jH9gF0dC2aE4x'}`
    const gate = new ToolExecutor({ otel: false })
    gate.register({ name: 'leaky', handler: (_args, ctx) => {
      ctx.progress(`cloning with ${token}`)
      ctx.progress({ progress: 2, message: `password=hunter2hunter2 ${token}` })
      return 'cloned'
    } })
    const [clientSide, serverSide] = InMemoryTransport.createLinkedPair()
    const served = await serveMcp(gate, serverSide)
    const client = new Client(CLIENT_INFO)
    try {
      await client.connect(clientSide)
      const seen = []
      const result = await client.callTool({ name: 'leaky', arguments: {} }, undefined, { onprogress: (progress) => seen.push(progress) })
      assert.equal(text(result), 'cloned')
      await new Promise((resolve) => setImmediate(resolve))
      assert.deepEqual(seen.map((p) => p.progress), [1, 2])
      assert.ok(!JSON.stringify(seen).includes(token) && !JSON.stringify(seen).includes('hunter2'), JSON.stringify(seen))
      assert.equal(seen[0].message, 'cloning with [REDACTED:github-token]')
    } finally {
      await client.close()
      await served.close()
      await gate.close()
    }
  })

  it("turns ctx.progress() into progress notifications that always increase, with the handler's messages", async () => {
    await withStdioClient(async (client) => {
      const seen = []
      const released = deferred()
      const result = await client.callTool({ name: 'slow', arguments: {} }, undefined, {
        onprogress: (progress) => {
          seen.push(progress)
          if (progress.message === 'finishing') client.callTool({ name: 'release', arguments: {} }).then(released.resolve, released.reject)
        },
      })
      assert.deepEqual(result, { content: [{ type: 'text', text: 'slow done' }] })
      assert.deepEqual(seen, [
        { progress: 1, message: 'starting' },
        { progress: 5, total: 10, message: 'halfway' },
        { progress: 6 }, // ctx.progress(3) came after 5: one step on
        { progress: 7, message: 'finishing' },
      ])
      assert.equal(text(await released.promise), 'released')
    })
  })

  it("aborts the handler's ctx.signal when the client cancels the request", async () => {
    await withStdioClient(async (client) => {
      const controller = new AbortController()
      const call = client.callTool({ name: 'wait_for_abort', arguments: {} }, undefined, {
        signal: controller.signal,
        // Cancelled once the handler runs (it reports progress first), so its signal is what the cancel reaches.
        onprogress: () => controller.abort('the user stopped it'),
      })
      await assert.rejects(call, { code: -32001, message: 'MCP error -32001: the user stopped it' })
      assert.equal(text(await client.callTool({ name: 'aborts_seen', arguments: {} })), '1')
    })
  })
})

describe('toolgate/mcp serveMcp over stdio: approvals through elicitation', () => {
  const DEPLOY_PROD = { name: 'deploy', arguments: { env: 'prod' } }
  const assertDenied = (result, reason) => assertError(result, 'approval_denied',
    `Tool "deploy" needs approval, and this call was not approved: declined: ${reason}. Do not retry it unchanged; ask the user, or do something else.`)

  it("asks the client's user with a form naming the tool and its arguments, and runs the call only on approve: true", async () => {
    const answers = [
      { action: 'accept', content: { approve: true } },
      { action: 'decline' },
      { action: 'accept', content: { approve: false } },
      { action: 'cancel' },
      { action: 'accept', content: { approve: true } },
    ]
    const asked = []
    const onElicit = (request) => {
      asked.push(request.params)
      return answers[asked.length - 1]
    }
    await withStdioClient(async (client) => {
      const results = []
      for (const _ of answers) results.push(await client.callTool(DEPLOY_PROD))

      assert.deepEqual(asked, Array(answers.length).fill({
        message: 'Allow deploy {"env":"prod"}? Asked by needsApproval (the tool\'s declaration).',
        requestedSchema: {
          type: 'object',
          properties: { approve: { type: 'boolean', title: 'Approve', description: 'Run deploy with these arguments' } },
          required: ['approve'],
        },
      }))
      assert.deepEqual(results[0], { content: [{ type: 'text', text: 'deployed prod (1 so far)' }] })
      assertDenied(results[1], 'the user declined')
      assertDenied(results[2], 'the user declined')
      assertDenied(results[3], 'the user dismissed the question')
      // The denied calls never ran: the next approved one is the second deployment.
      assert.deepEqual(results[4], { content: [{ type: 'text', text: 'deployed prod (2 so far)' }] })
    }, { capabilities: { elicitation: {} }, onElicit })
  })

  for (const [what, capabilities] of [['no elicitation capability', {}], ['URL elicitation only', { elicitation: { url: {} } }]]) {
    it(`denies the call when the client offers ${what}: it cannot ask its user`, async () => {
      await withStdioClient(async (client) => {
        assertDenied(await client.callTool(DEPLOY_PROD), 'it needs approval, and this MCP client cannot ask its user (it offers no elicitation form)')
      }, { capabilities })
    })
  }
})

describe('toolgate/mcp serveMcp: what it returns', () => {
  it('tells the client when the tools changed, and close() ends the connection', async () => {
    const gate = fixtureGate()
    const [clientSide, serverSide] = InMemoryTransport.createLinkedPair()
    const served = await serveMcp(gate, serverSide, { instructions: 'Use add for sums.' })
    const client = new Client(CLIENT_INFO)
    const changed = deferred()
    const closed = deferred()
    client.setNotificationHandler(ToolListChangedNotificationSchema, () => changed.resolve())
    client.onclose = () => closed.resolve()
    try {
      await client.connect(clientSide)
      assert.equal(client.getInstructions(), 'Use add for sums.')
      // No context given: every tool is listed, `secret` too.
      assert.deepEqual((await client.listTools()).tools.map((tool) => tool.name), [...LISTED, 'secret'])

      gate.register({ name: 'late', description: 'Registered after connecting.', handler: () => 'late ran' })
      await served.toolsChanged()
      await changed.promise
      assert.deepEqual((await client.listTools()).tools.map((tool) => tool.name).slice(-1), ['late'])
      assert.equal(text(await client.callTool({ name: 'late', arguments: {} })), 'late ran')

      await served.close()
      await closed.promise
    } finally {
      await client.close()
      await gate.close()
    }
  })
})

describe('toolgate/mcp serveMcp: tools/list of tools registered without some fields', () => {
  it('leaves out the description of a tool registered without one, rather than listing an empty one', async () => {
    const gate = new ToolExecutor()
    gate.register({ name: 'plain', handler: () => 'ran' })
    gate.register({ name: 'described', description: 'Has one.', handler: () => 'ran' })
    const [clientSide, serverSide] = InMemoryTransport.createLinkedPair()
    const served = await serveMcp(gate, serverSide)
    const client = new Client(CLIENT_INFO)
    try {
      await client.connect(clientSide)
      const [plain, described] = (await client.listTools()).tools
      assert.deepEqual(Object.keys(plain).sort(), ['annotations', 'inputSchema', 'name'])
      assert.equal(described.description, 'Has one.')
    } finally {
      await client.close()
      await served.close()
      await gate.close()
    }
  })
})

describe('toolgate/mcp mcpHttpHandler: Streamable HTTP sessions', () => {
  it('serves each client its own session, with the context computed from the request', async () => {
    const context = (extra) => ({ ...SERVED_CONTEXT, sessionId: extra.sessionId })
    await withHttp({ context }, async ({ handler, connect }) => {
      const first = await connect()
      const second = await connect()
      assert.equal(handler.sessions, 2)
      assert.notEqual(first.transport.sessionId, second.transport.sessionId)

      assert.deepEqual((await first.client.listTools()).tools.map((tool) => tool.name), LISTED)
      assert.deepEqual((await first.client.callTool({ name: 'add', arguments: { a: 2, b: 3 } })).structuredContent, { sum: 5 })
      for (const { client, transport } of [first, second]) {
        assert.deepEqual((await client.callTool({ name: 'whoami', arguments: {} })).structuredContent, { sessionId: transport.sessionId })
      }
      assertError(await second.client.callTool({ name: 'secret', arguments: {} }), 'unknown_tool',
        `There is no tool named "secret". Available tools: ${LISTED.join(', ')}. Call one of these by its exact name.`)

      // DELETE ends a session.
      await second.transport.terminateSession()
      assert.equal(handler.sessions, 1)
    })
  })

  it('answers 404 to an unknown session id, and opens no session for a request that is not an initialize', async () => {
    await withHttp({}, async ({ url, handler }) => {
      const listing = { jsonrpc: '2.0', id: 2, method: 'tools/list', params: {} }
      assert.deepEqual(await post(url, listing, { 'mcp-session-id': 'no-such-session' }), {
        status: 404,
        sessionId: null,
        reply: { jsonrpc: '2.0', error: { code: -32001, message: 'Session not found: start a new one with initialize' }, id: null },
      })
      assert.deepEqual(await post(url, listing), {
        status: 400,
        sessionId: null,
        reply: { jsonrpc: '2.0', error: { code: -32000, message: 'Bad Request: Server not initialized' }, id: null },
      })
      assert.equal(handler.sessions, 0)
    })
  })

  it('closes the least recently used session when a new one would pass maxSessions', async () => {
    await withHttp({ maxSessions: 2 }, async ({ handler, connect }) => {
      const first = await connect()
      const second = await connect()
      await first.client.listTools() // first is now the more recently used
      const third = await connect()
      assert.equal(handler.sessions, 2)
      await assert.rejects(second.client.listTools(), { code: 404, message: /Session not found: start a new one with initialize/ })
      for (const { client } of [first, third]) assert.deepEqual((await client.listTools()).tools.map((tool) => tool.name), LISTED)
    })
  })

  it("asks a session's client for approval over that session", async () => {
    await withHttp({}, async ({ connect }) => {
      const asked = []
      const onElicit = (request) => {
        asked.push(request.params.message)
        return { action: 'accept', content: { approve: true } }
      }
      const { client } = await connect({ capabilities: { elicitation: {} }, onElicit })
      await connect() // another session, which is never asked
      assert.deepEqual(await client.callTool({ name: 'deploy', arguments: { env: 'staging' } }), {
        content: [{ type: 'text', text: 'deployed staging (1 so far)' }],
      })
      assert.deepEqual(asked, ['Allow deploy {"env":"staging"}? Asked by needsApproval (the tool\'s declaration).'])
    })
  })

  it('refuses requests from hosts and origins outside allowedHosts and allowedOrigins, opening no session', async () => {
    await withHttp({ allowedOrigins: ['http://app.example'] }, async ({ url, handler }) => {
      assert.deepEqual(await post(url, initialize('2025-11-25'), { origin: 'http://evil.example' }), {
        status: 403,
        sessionId: null,
        reply: { jsonrpc: '2.0', error: { code: -32000, message: 'Invalid Origin header: http://evil.example' }, id: null },
      })
      assert.equal(handler.sessions, 0)
      assert.equal((await post(url, initialize('2025-11-25'), { origin: 'http://app.example' })).status, 200)
      assert.equal(handler.sessions, 1)
    })
    await withHttp({ allowedHosts: ['mcp.example'] }, async ({ url, handler }) => {
      const refused = await post(url, initialize('2025-11-25'))
      assert.equal(refused.status, 403)
      assert.deepEqual(refused.reply.error, { code: -32000, message: `Invalid Host header: ${url.host}` })
      assert.equal(handler.sessions, 0)
    })
  })

  it("refuses by default a Host or an Origin other than this machine's, and serves a client that sends no Origin", async () => {
    await withHttp({}, async ({ url, handler }) => {
      const refused = (reply, message) => assert.deepEqual(reply, { status: 403, sessionId: null, reply: { jsonrpc: '2.0', error: { code: -32000, message }, id: null } })
      // A page whose name was pointed at 127.0.0.1 (DNS rebinding) sends its own name as the Host.
      refused(await post(url, initialize('2025-11-25'), { host: 'evil.example.com', origin: 'http://evil.example.com' }), 'Invalid Host header: evil.example.com')
      // Any page may send a request to 127.0.0.1: its Origin says whose it is.
      refused(await post(url, initialize('2025-11-25'), { origin: 'http://evil.example.com' }), 'Invalid Origin header: http://evil.example.com')
      refused(await post(url, initialize('2025-11-25'), { origin: 'null' }), 'Invalid Origin header: null')
      refused(await post(url, initialize('2025-11-25'), { host: 'localhost.evil.example.com' }), 'Invalid Host header: localhost.evil.example.com')
      assert.equal(handler.sessions, 0)
      // Every loopback name, on any port; a page of the server's own origin; a client that sends no Origin.
      for (const headers of [{}, { host: 'localhost:9' }, { host: '[::1]' }, { origin: url.origin }, { host: 'LOCALHOST:80', origin: 'http://localhost' }]) {
        assert.equal((await post(url, initialize('2025-11-25'), headers)).status, 200, JSON.stringify(headers))
      }
      assert.equal(handler.sessions, 5)
    })
  })

  it('takes allowedHosts in place of the loopback names and allowedOrigins beside the own origin, as behind a proxy', async () => {
    // A proxy that passes the public name on and ends TLS; a web app of another origin that calls the endpoint.
    await withHttp({ allowedHosts: ['mcp.example.com', 'internal:8080'], allowedOrigins: ['https://app.example.com'] }, async ({ url }) => {
      for (const headers of [
        { host: 'mcp.example.com' },
        { host: 'mcp.example.com:443', origin: 'https://mcp.example.com' },
        { host: 'MCP.example.com', origin: 'https://app.example.com' },
        { host: 'internal:8080' },
      ]) {
        assert.equal((await post(url, initialize('2025-11-25'), headers)).status, 200, JSON.stringify(headers))
      }
      for (const [headers, message] of [
        [{}, `Invalid Host header: ${url.host}`],
        [{ host: 'internal:8081' }, 'Invalid Host header: internal:8081'],
        [{ host: 'mcp.example.com', origin: 'https://other.example.com' }, 'Invalid Origin header: https://other.example.com'],
      ]) {
        const { status, reply } = await post(url, initialize('2025-11-25'), headers)
        assert.deepEqual([status, reply.error.message], [403, message])
      }
    })
  })

  it('answers a call whose context function throws with an isError result that says so', async () => {
    const context = (extra) => {
      if (extra.sessionId !== undefined) throw new Error('no user for this session')
      return SERVED_CONTEXT
    }
    await withHttp({ context }, async ({ connect }) => {
      const { client } = await connect()
      const result = await client.callTool({ name: 'add', arguments: { a: 1, b: 1 } })
      assert.equal(result.isError, true)
      assert.deepEqual(result.content, [{ type: 'text', text: "Error: the tool call could not run: the server could not make this request's context (no user for this session)" }])
    })
  })

  it('keeps a session open while its call runs past sessionIdleMs, and tells every session the tools changed', async () => {
    await withHttp({ sessionIdleMs: 100 }, async ({ handler, connect }) => {
      const { client } = await connect()
      const changed = deferred()
      client.setNotificationHandler(ToolListChangedNotificationSchema, () => changed.resolve())
      const call = client.callTool({ name: 'wait_for_abort', arguments: {} }, undefined, { signal: AbortSignal.timeout(400) })
      await assert.rejects(call) // the client gave up after 400 ms: the session was busy all along
      assert.equal(handler.sessions, 1, 'a busy session is not idle')
      await handler.toolsChanged()
      await changed.promise
    })
  })

  it('ends every session on close(), and opens none after it', async () => {
    await withHttp({}, async ({ handler, connect }) => {
      const { client } = await connect()
      await connect()
      assert.equal(handler.sessions, 2)
      await handler.close()
      assert.equal(handler.sessions, 0)
      await assert.rejects(client.callTool({ name: 'add', arguments: { a: 1, b: 1 } }), { code: 503, message: /This MCP endpoint is closed/ })
      await assert.rejects(connect(), { code: 503 })
      assert.equal(handler.sessions, 0)
    })
  })
})

describe('toolgate/mcp mcpHttpHandler: the MCP conformance suite', () => {
  it('passes its DNS-rebinding scenario with the defaults: a foreign Host and Origin refused, its own answered', async () => {
    await withHttp({}, async ({ url }) => {
      const { code, stdout, checks } = await conformance('dns-rebinding-protection', url)
      assert.deepEqual(checks.map((check) => [check.id, check.status, check.details?.statusCode]), [
        ['localhost-host-rebinding-rejected', 'SUCCESS', 403],
        ['localhost-host-valid-accepted', 'SUCCESS', 200],
      ])
      assert.equal(code, 0, stdout)
    })
  })
})

describe('toolgate/mcp mcpHttpHandler: protocol versions', () => {
  // A version it does not know gets the latest it does.
  for (const [asked, answered] of [['2025-06-18', '2025-06-18'], ['2025-11-25', '2025-11-25'], ['2099-01-01', '2025-11-25']]) {
    it(`answers an initialize asking for ${asked} with ${answered}`, async () => {
      await withHttp({ name: 'http-gate', version: '9.9.9' }, async ({ url, handler }) => {
        const { status, sessionId, reply } = await post(url, initialize(asked))
        assert.equal(status, 200)
        assert.match(sessionId, /^[0-9a-f-]{36}$/)
        assert.equal(reply.id, 1)
        assert.equal(reply.result.protocolVersion, answered)
        assert.deepEqual(reply.result.serverInfo, { name: 'http-gate', version: '9.9.9' })
        assert.deepEqual(reply.result.capabilities.tools, { listChanged: true })
        assert.equal(handler.sessions, 1)
      })
    })
  }
})

describe('toolgate/mcp serveMcp: the MCP Inspector CLI', () => {
  it('lists the tools and calls one', async () => {
    const [listing, call] = await Promise.all([
      inspect('--method', 'tools/list'),
      inspect('--method', 'tools/call', '--tool-name', 'add', '--tool-arg', 'a=1', '--tool-arg', 'b=2'),
    ])
    assert.deepEqual(listing.tools.map((tool) => tool.name), LISTED)
    assert.deepEqual(listing.tools[0].annotations, { title: 'Add numbers', readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false })
    assert.deepEqual(call, { content: [{ type: 'text', text: '{"sum":3}' }], structuredContent: { sum: 3 } })
  })
})

describe('toolgate/mcp: programmer errors fail at once, before any connection', () => {
  const gate = fixtureGate()
  after(() => gate.close())
  // A real transport that nothing starts: the checks come before any connection.
  const transport = () => new StreamableHTTPServerTransport({ sessionIdGenerator: undefined })

  it('serveMcp rejects a non-transport, a non-gate and malformed options with a TypeError', async () => {
    await assert.rejects(serveMcp(gate, {}), {
      name: 'TypeError',
      message: 'serveMcp(gate, transport): transport must be an MCP transport (StdioServerTransport, StreamableHTTPServerTransport, …)',
    })
    await assert.rejects(serveMcp({ execute() {} }, transport()), { name: 'TypeError', message: 'serveMcp(gate, …): gate must be a ToolExecutor' })
    await assert.rejects(serveMcp(gate, transport(), null), { name: 'TypeError', message: 'serveMcp(gate, …, options): options must be an object' })
    await assert.rejects(serveMcp(gate, transport(), { context: 'admin' }), {
      name: 'TypeError',
      message: 'serveMcp options: context must be an ExecutionContext, or a function (request extra) => context',
    })
  })

  it('mcpHttpHandler throws for maxSessions 0, a bad sessionIdleMs, and a non-gate, naming itself', () => {
    assert.throws(() => mcpHttpHandler(gate, { maxSessions: 0 }), { name: 'TypeError', message: 'mcpHttpHandler options: maxSessions must be a positive integer' })
    assert.throws(() => mcpHttpHandler(gate, { sessionIdleMs: 1.5 }), { name: 'TypeError', message: 'mcpHttpHandler options: sessionIdleMs must be a positive integer' })
    assert.throws(() => mcpHttpHandler(gate, { name: 7 }), { name: 'TypeError', message: 'mcpHttpHandler options: name and version must be strings' })
    assert.throws(() => mcpHttpHandler({}), { name: 'TypeError', message: 'mcpHttpHandler(gate, …): gate must be a ToolExecutor' })
  })

  it('mcpHttpHandler throws for allowedHosts and allowedOrigins it cannot read, saying how to write them', () => {
    for (const allowedHosts of [[], 'localhost', ['http://localhost'], ['host/path'], [3000]]) {
      assert.throws(() => mcpHttpHandler(gate, { allowedHosts }), { name: 'TypeError', message: /^mcpHttpHandler options: allowedHosts must be a list of host names, each with or without a port \('mcp\.example\.com', '127\.0\.0\.1:3000'\)/ })
    }
    for (const allowedOrigins of ['https://app.example.com', ['app.example.com'], ['https://app.example.com/path'], ['file:///tmp']]) {
      assert.throws(() => mcpHttpHandler(gate, { allowedOrigins }), { name: 'TypeError', message: /^mcpHttpHandler options: allowedOrigins must be a list of origins, scheme:\/\/host\[:port\] with no path/ })
    }
  })

  it('refuses unknown options, as the rest of the package does', async () => {
    await assert.rejects(serveMcp(gate, transport(), { contxt: {} }), { name: 'TypeError', message: /^serveMcp options: unknown option "contxt" \(known: context, name, version, instructions\)$/ })
    assert.throws(() => mcpHttpHandler(gate, { maxSesions: 5 }), { name: 'TypeError', message: /^mcpHttpHandler options: unknown option "maxSesions"/ })
  })
})

describe('toolgate/mcp serveMcp: a truncated structure whose artifact is gone', () => {
  it('answers isError with the text rather than a result the SDK client would refuse', async () => {
    const gate = new ToolExecutor({ artifacts: { maxBytes: 16 } }) // too small to keep anything
    gate.register({
      name: 'table', readOnly: true, maxOutputChars: 60, parameters: { type: 'object' },
      outputSchema: { type: 'object', properties: { rows: { type: 'array', items: { type: 'integer' } } }, required: ['rows'] },
      handler: () => ({ rows: TABLE_ROWS }),
    })
    const [clientSide, serverSide] = InMemoryTransport.createLinkedPair()
    const served = await serveMcp(gate, serverSide)
    const client = new Client(CLIENT_INFO)
    try {
      await client.connect(clientSide)
      await client.listTools() // the SDK client then checks structured content against the schema
      const result = await client.callTool({ name: 'table', arguments: {} })
      assert.equal(result.isError, true)
      assert.match(text(result), /\n\(The whole structured output was not kept, so it cannot be sent\.\)$/)
    } finally {
      await client.close()
      await served.close()
      await gate.close()
    }
  })
})
