'use strict'
// The gate as an MCP server: its tools (those a context may use) listed with their JSON Schemas and with
// annotations from their declarations, and each `tools/call` run as one turn of the gate, with the request's
// cancellation as the turn's signal, `ctx.progress()` as progress notifications and the gate's asks as elicitation
// of the client's user. Every failure is an `isError` result in the gate's wording: nothing a client sends makes
// a JSON-RPC error but a malformed request.

const { randomUUID } = require('node:crypto')
const { readFile } = require('node:fs/promises')
const { finished } = require('node:stream')
// Taken at load: a test that fakes the global timers must not keep sessions open or close them early.
const { setTimeout, clearTimeout } = require('node:timers')
const { MAX_TIMER_MS } = require('./mcp-limits.js')

const PACKAGE_VERSION = require('../../package.json').version
/** How much of a call's arguments an approval question quotes. */
const QUOTED_ARGS = 500
/** Streamable HTTP sessions held at most (the least recently used closes first) and how long an idle one lives. */
const MAX_SESSIONS = 1_000
const SESSION_IDLE_MS = 30 * 60_000
/** The Host names an HTTP endpoint answers unless `allowedHosts` names others: this machine's, on any port. */
const LOOPBACK_HOSTS = ['localhost', '127.0.0.1', '[::1]']

/** Serves the gate's tools over `transport` (stdio, Streamable HTTP, any MCP transport). Resolves once connected. */
async function serveMcp(sdk, gate, transport, options = {}) {
  if (typeof transport?.start !== 'function' || typeof transport?.send !== 'function') {
    throw new TypeError('serveMcp(gate, transport): transport must be an MCP transport (StdioServerTransport, StreamableHTTPServerTransport, …)')
  }
  const server = mcpServer(sdk, gate, readOptions(options, 'serveMcp'), 'serveMcp')
  await server.connect(transport)
  return serving(server)
}

/** What a caller holds of a server: the SDK's `Server`, a way to tell the client the tools changed, and close. */
function serving(server) {
  return {
    server,
    toolsChanged: () => server.sendToolListChanged().catch(() => {}),
    close: () => server.close(),
  }
}

const SERVE_OPTIONS = ['context', 'name', 'version', 'instructions']

function readOptions(options, where, known = SERVE_OPTIONS) {
  if (options === null || typeof options !== 'object') throw new TypeError(`${where}(gate, …, options): options must be an object`)
  for (const key of Object.keys(options)) {
    if (!known.includes(key)) throw new TypeError(`${where} options: unknown option "${key}" (known: ${known.join(', ')})`)
  }
  const { context, name = 'toolgate', version = PACKAGE_VERSION, instructions } = options
  if (typeof name !== 'string' || typeof version !== 'string') throw new TypeError(`${where} options: name and version must be strings`)
  if (instructions !== undefined && typeof instructions !== 'string') throw new TypeError(`${where} options: instructions must be a string`)
  if (context !== undefined && (context === null || (typeof context !== 'object' && typeof context !== 'function'))) {
    throw new TypeError(`${where} options: context must be an ExecutionContext, or a function (request extra) => context`)
  }
  return { context, name, version, instructions }
}

/** A `Server` of the SDK answering `tools/list` and `tools/call` from the gate. */
function mcpServer(sdk, gate, { context, name, version, instructions }, where) {
  if (typeof gate?.execute !== 'function' || typeof gate?.list !== 'function') throw new TypeError(`${where}(gate, …): gate must be a ToolExecutor`)
  const { ListToolsRequestSchema, CallToolRequestSchema } = sdk.types
  const server = new sdk.Server({ name, version }, { capabilities: { tools: { listChanged: true } }, instructions })
  const contextOf = (extra) => (typeof context === 'function' ? context(extra) : context)
  server.setRequestHandler(ListToolsRequestSchema, async (_request, extra) => ({
    tools: gate.list({ context: await contextOf(extra) }).map(mcpTool),
  }))
  server.setRequestHandler(CallToolRequestSchema, async (request, extra) => {
    let turnContext
    try {
      turnContext = await contextOf(extra)
    } catch (err) {
      return refusal(`the server could not make this request's context (${err?.message ?? String(err)})`)
    }
    return callTool(sdk, gate, server, request, extra, turnContext)
  })
  return server
}

/** A registered tool as `tools/list` shows it. */
function mcpTool(tool) {
  const destructive = tool.risk === 'destructive' || tool.risk === 'admin'
  const annotations = { readOnlyHint: tool.readOnly, destructiveHint: !tool.readOnly && destructive, idempotentHint: tool.idempotent, openWorldHint: tool.untrusted }
  const entry = { name: tool.name, inputSchema: tool.parameters, annotations }
  // The gate holds no description as ''; MCP's is optional, and an empty one tells a client's model nothing.
  if (tool.description !== '') entry.description = tool.description
  const title = tool.origin?.title
  if (typeof title === 'string') {
    entry.title = title
    annotations.title = title
  }
  // The 2025 revisions take only an object's schema for a structured output.
  if (objectSchema(tool.outputSchema)) entry.outputSchema = tool.outputSchema
  return entry
}

function objectSchema(schema) {
  return schema !== null && typeof schema === 'object' && schema.type === 'object'
}

async function callTool(sdk, gate, server, request, extra, context) {
  const { name, arguments: args } = request.params
  const token = request.params._meta?.progressToken
  let sent = 0
  const onProgress = token === undefined ? undefined : ({ info }) => {
    const progress = progressOf(info, sent)
    sent = progress.progress
    extra.sendNotification({ method: 'notifications/progress', params: { progressToken: token, ...progress } }).catch(() => {})
  }
  let result
  try {
    ;[result] = await gate.execute([{ id: String(extra.requestId), name, arguments: args ?? {} }], {
      context,
      signal: extra.signal,
      onProgress,
      approve: (asked) => elicitApproval(sdk, server, extra, asked),
    })
  } catch (err) {
    // The gate refused the turn itself (it was closed, the context is malformed): the client's model can read it.
    return refusal(err?.message ?? String(err))
  }
  return callToolResult(result, () => gate.list().find((tool) => tool.name === result.name))
}

/** A call the gate never took up, as a result the client's model can read. */
function refusal(why) {
  return { content: [{ type: 'text', text: `Error: the tool call could not run: ${why}` }], isError: true }
}

/** `notifications/progress` params for what a handler passed to `ctx.progress(info)`: a number, or
 * `{ progress, total, message }`, as given when it moves forward; anything else counts one step. */
function progressOf(info, last) {
  const given = typeof info === 'number' ? { progress: info } : info !== null && typeof info === 'object' ? info : {}
  const params = { progress: Number.isFinite(given.progress) && given.progress > last ? given.progress : last + 1 }
  if (Number.isFinite(given.total)) params.total = given.total
  const message = typeof info === 'string' ? info : given.message
  if (typeof message === 'string') params.message = message
  return params
}

/** A ToolResult as a `CallToolResult`: the text the model reads, the images, and the structure (`structuredContent`)
 * when the output is an object; a failure is `isError` with the gate's wording, its kind in `_meta`. */
async function callToolResult(result, registered) {
  const content = [{ type: 'text', text: result.output }]
  for (const image of result.metadata.images ?? []) content.push({ type: 'image', data: image.data, mimeType: image.mediaType })
  if (!result.success) {
    const meta = { 'toolgate/errorKind': result.errorKind, 'toolgate/retryable': result.retryable }
    if (result.retryAfterMs !== undefined) meta['toolgate/retryAfterMs'] = result.retryAfterMs
    return { content, isError: true, _meta: meta }
  }
  if (!result.truncated) return withStructure(content, result.metadata.structured)
  const schema = registered()?.outputSchema
  if (!objectSchema(schema)) return { content }
  const whole = await wholeStructure(result)
  // A tool whose schema requires a structure must give one; without it, the SDK's client refuses the whole answer.
  if (whole === undefined) return { content: [{ type: 'text', text: `${result.output}\n(The whole structured output was not kept, so it cannot be sent.)` }], isError: true }
  return withStructure(content, whole)
}

function withStructure(content, structured) {
  if (structured !== null && typeof structured === 'object' && !Array.isArray(structured)) return { content, structuredContent: structured }
  return { content }
}

/** A truncated output's structure, sent only for a tool whose output schema requires one (any other would undo
 * the truncation), and then whole: the structure in the result is cut as the text is, and would not match the
 * schema. The artifact holds it whole, redacted. */
async function wholeStructure(result) {
  const path = result.metadata.artifactPath
  if (path === undefined) return undefined
  try {
    return JSON.parse(await readFile(path, 'utf8'))
  } catch {
    return undefined // gone already (its TTL, the folder's cap): the client gets the text
  }
}

/** The gate asks about a call: the client's user answers through elicitation, when the client offers it. */
async function elicitApproval(sdk, server, extra, asked) {
  const elicitation = server.getClientCapabilities()?.elicitation
  // An empty `elicitation` capability (2025-06-18) means forms; 2025-11-25 names them (`form`) beside `url`.
  if (!elicitation || (elicitation.url !== undefined && elicitation.form === undefined)) {
    return { decision: 'deny', reason: 'it needs approval, and this MCP client cannot ask its user (it offers no elicitation form)' }
  }
  let args = JSON.stringify(asked.arguments)
  if (args.length > QUOTED_ARGS) args = `${args.slice(0, QUOTED_ARGS)}…`
  const params = {
    message: `Allow ${asked.toolName} ${args}? Asked by ${asked.rule}${asked.reason ? `: ${asked.reason}` : ''}.`,
    requestedSchema: {
      type: 'object',
      properties: { approve: { type: 'boolean', title: 'Approve', description: `Run ${asked.toolName} with these arguments` } },
      required: ['approve'],
    },
  }
  const answer = await extra.sendRequest({ method: 'elicitation/create', params }, sdk.types.ElicitResultSchema, { signal: extra.signal, timeout: MAX_TIMER_MS })
  if (answer.action === 'accept' && answer.content?.approve === true) return 'approve'
  return { decision: 'deny', reason: answer.action === 'cancel' ? 'the user dismissed the question' : 'the user declined' }
}

/**
 * A Streamable HTTP endpoint for node:http or Express: `(req, res, parsedBody?) => Promise<void>`. Each client
 * session (begun by `initialize`, named by `Mcp-Session-Id`) gets its own server; `handler.close()` ends them.
 */
function mcpHttpHandler(sdk, gate, options = {}) {
  if (options === null || typeof options !== 'object') throw new TypeError('mcpHttpHandler(gate, options): options must be an object')
  const { maxSessions = MAX_SESSIONS, sessionIdleMs = SESSION_IDLE_MS, allowedHosts, allowedOrigins, ...rest } = options
  if (!(Number.isInteger(maxSessions) && maxSessions > 0)) throw new TypeError('mcpHttpHandler options: maxSessions must be a positive integer')
  if (!(Number.isInteger(sessionIdleMs) && sessionIdleMs > 0)) throw new TypeError('mcpHttpHandler options: sessionIdleMs must be a positive integer')
  const serveOptions = readOptions(rest, 'mcpHttpHandler', [...SERVE_OPTIONS, 'maxSessions', 'sessionIdleMs', 'allowedHosts', 'allowedOrigins'])
  const refusal = requestRefusal(allowedHosts, allowedOrigins)
  mcpServer(sdk, gate, serveOptions, 'mcpHttpHandler') // a bad gate throws now, not at the first request
  /** Open sessions by id, least recently used first. */
  const sessions = new Map()

  const end = (id) => {
    const session = sessions.get(id)
    if (!session) return
    sessions.delete(id)
    clearTimeout(session.idle)
    session.server.close().catch(() => {})
  }
  /** A session used now: the most recently used. */
  const touch = (id, session) => {
    sessions.delete(id)
    sessions.set(id, session)
    idleAfter(id, session)
  }
  /** It closes after `sessionIdleMs` without use, unless a request of it is still open then (a long call, the
   * client's event stream): looking again later is no use, and leaves its place among the least recently used. */
  const idleAfter = (id, session) => {
    clearTimeout(session.idle)
    session.idle = setTimeout(() => (session.open > 0 ? idleAfter(id, session) : end(id)), sessionIdleMs)
    session.idle.unref()
  }
  /** One request of a session: it is busy until the answer's stream closes, and used then. */
  const serve = async (session, req, res, parsedBody) => {
    session.open++
    // `finished` also answers for a response already closed (the client left while a body parser ran).
    finished(res, () => {
      session.open--
      const id = session.transport.sessionId
      if (id !== undefined && sessions.get(id) === session) touch(id, session)
    })
    await session.transport.handleRequest(req, res, parsedBody)
  }

  let closed = false
  const handler = async (req, res, parsedBody) => {
    const refused = refusal(req.headers)
    if (refused) return answerError(res, 403, -32000, refused)
    if (closed) return answerError(res, 503, -32000, 'This MCP endpoint is closed')
    const id = req.headers['mcp-session-id']
    const open = typeof id === 'string' ? sessions.get(id) : undefined
    if (open) {
      touch(id, open)
      return serve(open, req, res, parsedBody)
    }
    if (id !== undefined) return answerError(res, 404, -32001, 'Session not found: start a new one with initialize')
    const session = { transport: undefined, server: mcpServer(sdk, gate, serveOptions, 'mcpHttpHandler'), idle: undefined, open: 0 }
    session.transport = new sdk.StreamableHTTPServerTransport({
      sessionIdGenerator: randomUUID,
      onsessioninitialized: (sessionId) => {
        // An initialize that was under way when the handler closed opens nothing.
        if (closed) return void session.server.close().catch(() => {})
        if (sessions.size >= maxSessions) end(sessions.keys().next().value)
        touch(sessionId, session)
      },
      onsessionclosed: end,
    })
    session.transport.onclose = () => session.transport.sessionId && end(session.transport.sessionId)
    await session.server.connect(session.transport)
    await serve(session, req, res, parsedBody)
    // A request that began no session (not an initialize) leaves nothing open.
    if (session.transport.sessionId === undefined) await session.server.close()
  }
  handler.close = async () => {
    closed = true
    for (const id of [...sessions.keys()]) end(id)
  }
  /** Tells every session's client the tools changed (after `register` or `unregister`). */
  handler.toolsChanged = () => Promise.all([...sessions.values()].map((session) => session.server.sendToolListChanged().catch(() => {}))).then(() => {})
  Object.defineProperty(handler, 'sessions', { get: () => sessions.size })
  return handler
}

/**
 * What refuses a request by its Host and Origin headers, as MCP's transport spec asks of a server (it MUST validate
 * Origin, and answer 403 to an invalid one): a page whose name its attacker points at this machine (DNS rebinding)
 * sends that name as its Host, and any page sends its own origin. The Host must be one of `allowedHosts` (a name
 * matches on any port, `name:port` on that port only; default: this machine's names). An Origin, which browsers send
 * and other clients do not, must be the request's own (a page of the allowed host) or one of `allowedOrigins`.
 * The function answers the refusal's message, or undefined.
 */
function requestRefusal(allowedHosts = LOOPBACK_HOSTS, allowedOrigins = []) {
  const hostsHint = "a list of host names, each with or without a port ('mcp.example.com', '127.0.0.1:3000')"
  const originsHint = "a list of origins, scheme://host[:port] with no path ('https://app.example.com')"
  if (!Array.isArray(allowedHosts) || allowedHosts.length === 0) throw new TypeError(`mcpHttpHandler options: allowedHosts must be ${hostsHint}`)
  const hosts = allowedHosts.map((entry) => {
    const host = typeof entry === 'string' ? hostOf(entry) : undefined
    if (!host) throw new TypeError(`mcpHttpHandler options: allowedHosts must be ${hostsHint}; got ${JSON.stringify(entry)}`)
    return host
  })
  if (!Array.isArray(allowedOrigins)) throw new TypeError(`mcpHttpHandler options: allowedOrigins must be ${originsHint}`)
  const origins = new Set(allowedOrigins.map((entry) => {
    const url = typeof entry === 'string' ? httpUrl(entry) : undefined
    if (url === undefined || url.href !== `${url.origin}/`) throw new TypeError(`mcpHttpHandler options: allowedOrigins must be ${originsHint}; got ${JSON.stringify(entry)}`)
    return url.origin
  }))
  return (headers) => {
    const { host, origin } = headers
    if (typeof host !== 'string') return 'Missing Host header'
    const sent = hostOf(host)
    if (!sent || !hosts.some((allowed) => allowed.name === sent.name && (allowed.port === undefined || allowed.port === sent.port))) {
      return `Invalid Host header: ${host}`
    }
    if (origin === undefined) return undefined
    const from = typeof origin === 'string' ? httpUrl(origin) : undefined
    // The request's own origin, in the scheme the page used (a proxy in front may have ended its TLS).
    if (from && (origins.has(from.origin) || from.origin === httpUrl(`${from.protocol}//${host}`)?.origin)) return undefined
    return `Invalid Origin header: ${origin}`
  }
}

/** A Host header's name (lowercase; an IPv6 address in brackets) and port, or undefined when it is not one. */
function hostOf(text) {
  const match = /^(\[[0-9a-f:.]+\]|[^\s:/?#@[\]]+)(?::(\d{1,5}))?$/i.exec(text)
  return match ? { name: match[1].toLowerCase(), port: match[2] } : undefined
}

/** `text` as an http or https URL, or undefined when it is not one. */
function httpUrl(text) {
  try {
    const url = new URL(text)
    return url.protocol === 'http:' || url.protocol === 'https:' ? url : undefined
  } catch {
    return undefined
  }
}

/** A JSON-RPC error as an HTTP answer, as the SDK's transport words its own. */
function answerError(res, status, code, message) {
  res.writeHead(status, { 'content-type': 'application/json' })
  res.end(JSON.stringify({ jsonrpc: '2.0', error: { code, message }, id: null }))
}

module.exports = { serveMcp, mcpHttpHandler }
