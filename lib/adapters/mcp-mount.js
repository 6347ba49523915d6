'use strict'
// An MCP server's tools mounted on a gate: each registered under a name every provider accepts, with the server's
// schemas, and with its annotations as declarations only when the server is trusted (the spec calls them untrusted
// otherwise). A call goes to `tools/call` under the gate's limits and signal; what comes back is read leniently and
// folded into what a handler returns or throws, so that a server's `isError` is a failure and a dropped connection
// a retryable one.

const { createHash } = require('node:crypto')
const { RetryableError } = require('../../index.js')
const { clip, reprOf } = require('../engine/describe.js')
const { fenceUntrusted } = require('../engine/native.js')
// Taken at load: a test that fakes the global timers must not stall the mount's own timers.
const { setTimeout, clearTimeout } = require('node:timers')
const { MAX_TIMER_MS } = require('./mcp-limits.js')

/** Names the gate accepts: what every provider accepts. */
const NAME_CHARS = /[^A-Za-z0-9_-]/g
const MAX_NAME = 64
const MAX_PREFIX = 32
/** The most of a tool's description the model is shown: a server's own run to a few hundred characters. */
const MAX_DESCRIPTION = 4_000
/** Bounds on what a server's listing may make the gate hold: no server can grow it without end. */
const MAX_PAGES = 1_000
const MAX_TOOLS = 10_000
/** How long the listing of tools may take unless the mount says otherwise (the SDK's default). */
const LIST_TIMEOUT_MS = 60_000
/** Notifications that come together are one re-listing. */
const LIST_CHANGED_DEBOUNCE_MS = 50
/** The SDK's JSON-RPC error code for a connection that closed with the request unanswered. */
const CONNECTION_CLOSED = -32000
/** JSON-RPC's code for an internal error: what an answer the SDK cannot read becomes (see readMalformedAnswers). */
const INTERNAL_ERROR = -32603
/** The read buffers of stdio transports that read malformed answers, and the answers they read so. */
const lenientBuffers = new WeakSet()
const malformedAnswers = new WeakSet()
/** Which mounts listen to each client's `notifications/tools/list_changed` (the SDK keeps one handler per method). */
const mountsOf = new WeakMap()
const LIST_CHANGED = 'notifications/tools/list_changed'
/** The fields of a tool spec a mount may set for its tools on top of what it reads off the server. */
const OVERRIDABLE = [
  'timeoutMs', 'idleTimeoutMs', 'retry', 'maxConcurrency', 'cache', 'dedup', 'rateLimit', 'maxOutputChars',
  'untrusted', 'aliases', 'rollbackWhen', 'needsApproval', 'risk', 'check', 'pathWithin', 'urlHosts', 'readOnly', 'idempotent',
]

/**
 * Registers the tools of the MCP server `client` is connected to on `gate`, and keeps them in step with the
 * server's `notifications/tools/list_changed`. Resolves to the mount; rejects when the server cannot list its tools.
 */
async function mountMcp(sdk, gate, client, options = {}) {
  if (gate === null || typeof gate?.register !== 'function' || typeof gate?.unregister !== 'function') {
    throw new TypeError('mountMcp(gate, client): gate must be a ToolExecutor')
  }
  if (typeof client?.request !== 'function' || typeof client?.setNotificationHandler !== 'function') {
    throw new TypeError('mountMcp(gate, client): client must be a connected Client of @modelcontextprotocol/sdk')
  }
  const mount = new McpMount(sdk, gate, client, readOptions(options))
  // Listening first: a change the server announces while it is being listed is listed again.
  mount.listen()
  try {
    await mount.refresh()
  } catch (err) {
    mount.unmount()
    throw err
  }
  return mount
}

function readOptions(options) {
  if (options === null || typeof options !== 'object') throw new TypeError('mountMcp(gate, client, options): options must be an object')
  const known = ['prefix', 'include', 'exclude', 'trust', 'tools', 'listTimeoutMs', 'onToolsChanged', 'onError']
  for (const key of Object.keys(options)) {
    if (!known.includes(key)) throw new TypeError(`mountMcp options: unknown option "${key}" (known: ${known.join(', ')})`)
  }
  const { prefix, include, exclude, trust = false, tools, listTimeoutMs = LIST_TIMEOUT_MS, onToolsChanged, onError } = options
  if (prefix !== undefined && typeof prefix !== 'string') throw new TypeError('mountMcp options: prefix must be a string (\'\' for none)')
  if (typeof trust !== 'boolean') throw new TypeError('mountMcp options: trust must be a boolean')
  if (!(Number.isInteger(listTimeoutMs) && listTimeoutMs > 0 && listTimeoutMs <= MAX_TIMER_MS)) {
    throw new TypeError(`mountMcp options: listTimeoutMs must be a positive integer of at most ${MAX_TIMER_MS}`)
  }
  for (const [name, fn] of [['onToolsChanged', onToolsChanged], ['onError', onError]]) {
    if (fn !== undefined && typeof fn !== 'function') throw new TypeError(`mountMcp options: ${name} must be a function`)
  }
  if (typeof tools !== 'function') toolFields(tools)
  return { prefix, include: selector(include, 'include', true), exclude: selector(exclude, 'exclude', false), trust, tools, listTimeoutMs, onToolsChanged, onError }
}

/** `include` / `exclude` as a predicate on an MCP tool: names or `*` globs of the server's names, or a function. */
function selector(value, option, fallback) {
  if (value === undefined) return () => fallback
  if (typeof value === 'function') return (tool) => value(tool) === true
  if (!Array.isArray(value) || !value.every((v) => typeof v === 'string')) {
    throw new TypeError(`mountMcp options: ${option} must be a list of the server's tool names (\`*\` globs allowed) or a function (tool) => boolean`)
  }
  const patterns = value.map((glob) => new RegExp(`^${glob.split('*').map(escapeRegExp).join('.*')}$`, 's'))
  return (tool) => patterns.some((pattern) => pattern.test(tool.name))
}

function escapeRegExp(text) {
  return text.replace(/[\\^$.|?+()[\]{}]/g, '\\$&')
}

/** A name the gate accepts for the server's `mcpName`: the prefix, `__`, and the name with every other character
 * as `_`; one too long, or taken by another of the server's tools, ends in a hash of the server's name. */
function mappedName(prefix, mcpName, taken) {
  const base = `${prefix ? `${prefix}__` : ''}${mcpName.replace(NAME_CHARS, '_')}`
  if (base.length <= MAX_NAME && !taken.has(base)) return base
  // A hash taken too (another tool's name happens to end in it) is salted until it is free.
  for (let salt = 0; ; salt++) {
    const hash = createHash('sha256').update(salt === 0 ? mcpName : `${mcpName}#${salt}`).digest('hex').slice(0, 8)
    const name = `${base.slice(0, MAX_NAME - hash.length - 1)}_${hash}`
    if (!taken.has(name)) return name
  }
}

class McpMount {
  #sdk
  #gate
  #client
  #options
  /** Our name → the mounted tool: `{ name, mcpName, definition }`. */
  #tools = new Map()
  #skipped = []
  #server
  #refreshing = null
  #again = false
  #debounce = null
  #closed = false

  constructor(sdk, gate, client, options) {
    this.#sdk = sdk
    this.#gate = gate
    this.#client = client
    this.#options = options
    const info = safely(() => client.getServerVersion?.()) ?? {}
    this.#server = typeof info.name === 'string' && info.name !== '' ? info.name : 'mcp'
    const prefix = options.prefix ?? this.#server
    this.prefix = prefix.replace(NAME_CHARS, '_').slice(0, MAX_PREFIX)
  }

  /** The server's name, as it gave it. */
  get server() {
    return this.#server
  }

  /** The mounted tools: the gate's name and the server's. */
  get tools() {
    return [...this.#tools.values()].map(({ name, mcpName }) => ({ name, mcpName }))
  }

  /** The server's tools the last listing did not mount, and why (a schema that does not compile or is nested too
   * deeply to read, a name taken, a task-only tool, anything else the gate refused). */
  get skipped() {
    return this.#skipped.slice()
  }

  /** The gate's name for one of the server's tools. */
  nameOf(mcpName) {
    for (const tool of this.#tools.values()) if (tool.mcpName === mcpName) return tool.name
    return undefined
  }

  /** The server's name for one of the mounted tools. */
  mcpNameOf(name) {
    return this.#tools.get(name)?.mcpName
  }

  /** Lists the server's tools again and brings the gate in step: new ones registered, changed ones replaced,
   * removed ones unregistered. Listings never overlap: one asked for during another runs after it. */
  refresh() {
    if (this.#closed) return Promise.reject(new Error('this MCP mount was unmounted'))
    if (this.#refreshing) {
      this.#again = true
      return this.#refreshing
    }
    this.#refreshing = (async () => {
      try {
        do {
          this.#again = false
          this.#apply(await this.#listAll())
        } while (this.#again && !this.#closed)
      } finally {
        this.#refreshing = null
      }
    })()
    return this.#refreshing
  }

  /** Unregisters the mounted tools and stops following the server's changes. */
  unmount() {
    if (this.#closed) return
    this.#closed = true
    clearTimeout(this.#debounce)
    for (const name of this.#tools.keys()) this.#gate.unregister(name)
    this.#tools.clear()
    const mounts = mountsOf.get(this.#client)
    mounts?.delete(this)
    if (mounts?.size === 0) {
      mountsOf.delete(this.#client)
      safely(() => this.#client.removeNotificationHandler(LIST_CHANGED))
    }
  }

  /** Follows `notifications/tools/list_changed`: one handler per client serves every mount on it. */
  listen() {
    let mounts = mountsOf.get(this.#client)
    if (!mounts) {
      mounts = new Set()
      mountsOf.set(this.#client, mounts)
      this.#client.setNotificationHandler(this.#sdk.types.ToolListChangedNotificationSchema, () => {
        for (const mount of mounts) mount.#changed()
      })
    }
    mounts.add(this)
  }

  #changed() {
    if (this.#closed) return
    clearTimeout(this.#debounce)
    this.#debounce = setTimeout(() => {
      this.refresh().then(
        () => !this.#closed && this.#options.onToolsChanged && safely(() => this.#options.onToolsChanged(this)),
        (err) => {
          if (this.#closed) return
          if (this.#options.onError) safely(() => this.#options.onError(err))
          else process.emitWarning(`toolgate/mcp: re-listing the tools of MCP server "${this.#server}" failed: ${err?.message ?? err}`)
        },
      )
    }, LIST_CHANGED_DEBOUNCE_MS)
    this.#debounce.unref?.()
  }

  /** Every page of `tools/list`, read leniently (one malformed tool is skipped, not the listing). */
  async #listAll() {
    const { ResultSchema } = this.#sdk.types
    const tools = []
    const cursors = new Set()
    let cursor
    readMalformedAnswers(this.#client.transport)
    for (let page = 0; page < MAX_PAGES; page++) {
      const result = await this.#client.request(
        { method: 'tools/list', params: cursor === undefined ? {} : { cursor } },
        ResultSchema,
        { timeout: this.#options.listTimeoutMs },
      ).catch((err) => {
        throw new Error(`MCP server "${this.#server}" could not list its tools: ${err?.message ?? String(err)}`, { cause: err })
      })
      if (!Array.isArray(result.tools)) throw new Error(`MCP server "${this.#server}" answered tools/list without a tools array`)
      tools.push(...result.tools)
      if (tools.length > MAX_TOOLS) throw new Error(`MCP server "${this.#server}" lists more than ${MAX_TOOLS} tools`)
      cursor = result.nextCursor
      // An empty cursor ends the listing too, as the SDK's own listTools reads it.
      if (cursor === undefined || cursor === null || cursor === '') return tools
      if (typeof cursor !== 'string') throw new Error(`MCP server "${this.#server}" gave a tools/list cursor that is not a string`)
      if (cursors.has(cursor)) throw new Error(`MCP server "${this.#server}" repeats the tools/list cursor ${JSON.stringify(cursor.slice(0, 100))}: its pages never end`)
      cursors.add(cursor)
    }
    throw new Error(`MCP server "${this.#server}" lists its tools over more than ${MAX_PAGES} pages`)
  }

  /** Brings the gate in step with a listing: every spec is made first (what the application's `tools`,
   * `include` or `exclude` throw leaves the gate untouched), then registered. A tool that cannot be read or that the
   * gate refuses, whatever the reason, is skipped: it never keeps the others from being mounted or listed again. */
  #apply(listed) {
    if (this.#closed) return
    const previous = this.#tools
    const skipped = []
    const usable = []
    const seen = new Set()
    for (const [at, tool] of listed.entries()) {
      const problem = unusable(tool) ?? (seen.has(tool.name) ? 'the server lists it twice; its first entry is mounted' : undefined)
      if (typeof tool?.name === 'string') seen.add(tool.name)
      if (problem) skipped.push({ at, mcpName: describeName(tool?.name), reason: problem })
      else if (this.#options.include(tool) && !this.#options.exclude(tool)) usable.push({ at, tool })
    }
    const names = this.#names(usable.map(({ tool }) => tool.name))
    const planned = []
    for (const { at, tool } of usable) {
      const name = names.get(tool.name)
      let definition
      try {
        definition = JSON.stringify(tool)
      } catch (err) {
        // Nested deeper than the stack goes (a server's JSON parses at any depth): the gate could not take it either.
        skipped.push({ at, mcpName: tool.name, reason: `it is nested too deeply to read (${err?.message ?? String(err)})` })
        continue
      }
      const before = previous.get(name)
      const same = before?.definition === definition && before.mcpName === tool.name
      planned.push({ at, tool, name, definition, before, spec: same ? undefined : this.#spec(tool, name) })
    }
    const next = new Map()
    for (const { at, tool, name, definition, before, spec } of planned) {
      if (spec === undefined) {
        next.set(name, before)
        continue
      }
      try {
        this.#gate.register({ ...spec, replace: before !== undefined })
        next.set(name, { name, mcpName: tool.name, definition })
      } catch (err) {
        skipped.push({ at, mcpName: tool.name, reason: err?.message ?? String(err) })
        // A tool the server changed into one the gate cannot take is not left behind in its old form.
        if (before) this.#gate.unregister(name)
      }
    }
    for (const name of previous.keys()) if (!next.has(name)) this.#gate.unregister(name)
    this.#tools = next
    this.#skipped = skipped.sort((a, b) => a.at - b.at).map(({ mcpName, reason }) => ({ mcpName, reason }))
  }

  /** The gate's name for each of the server's names: a tool mounted before keeps its name, so that nothing keyed
   * by it (rules, approvals, the cache, the model's earlier turns) moves to another tool; new ones take what is left. */
  #names(mcpNames) {
    const names = new Map()
    const taken = new Set()
    const listed = new Set(mcpNames)
    for (const { name, mcpName } of this.#tools.values()) {
      if (listed.has(mcpName) && !names.has(mcpName)) {
        names.set(mcpName, name)
        taken.add(name)
      }
    }
    for (const mcpName of mcpNames) {
      if (names.has(mcpName)) continue
      const name = mappedName(this.prefix, mcpName, taken)
      names.set(mcpName, name)
      taken.add(name)
    }
    return names
  }

  #spec(tool, name) {
    const annotations = isObject(tool.annotations) ? tool.annotations : undefined
    const trusted = this.#options.trust
    const origin = { server: this.#server, name: tool.name, trusted }
    if (typeof tool.title === 'string') origin.title = tool.title
    else if (typeof annotations?.title === 'string') origin.title = annotations.title
    if (annotations) origin.annotations = annotations
    const spec = {
      name,
      description: shownDescription(typeof tool.description === 'string' ? tool.description : origin.title ?? '', name, trusted),
      parameters: tool.inputSchema,
      ...declarations(trusted ? annotations ?? {} : undefined),
      origin,
      // MCP's idempotentHint says a repeat does no more; it says nothing of a result staying true (a write's
      // answer, a balance read twice): nothing is cached unless the application says so.
      cache: false,
    }
    if (isObject(tool.outputSchema)) spec.outputSchema = tool.outputSchema
    const extra = typeof this.#options.tools === 'function' ? this.#options.tools({ ...tool, mappedName: name }) : this.#options.tools
    Object.assign(spec, toolFields(extra))
    spec.handler = this.#handler(tool.name, isObject(tool.outputSchema), spec.readOnly || spec.idempotent)
    return spec
  }

  #handler(mcpName, hasOutputSchema, safeToRepeat) {
    const client = this.#client
    const server = this.#server
    const { ResultSchema } = this.#sdk.types
    return async (args, ctx) => {
      let result
      // The transport the call goes out on: a different one (or none) when it fails means the connection closed on
      // it, even when the application reconnected within its onclose.
      const transport = client.transport
      readMalformedAnswers(transport)
      try {
        result = await client.request({ method: 'tools/call', params: { name: mcpName, arguments: args } }, ResultSchema, {
          signal: ctx.signal,
          timeout: MAX_TIMER_MS,
          onprogress: (progress) => ctx.progress(progress),
        })
      } catch (err) {
        if (ctx.signal.aborted) throw err // the gate has answered the call already
        throw requestFailure(err, server, client.transport !== transport, safeToRepeat)
      }
      return toolValue(result, server, hasOutputSchema)
    }
  }
}

/** A mount's `tools` fields, checked: only those it may set. */
function toolFields(fields) {
  if (fields == null) return {}
  if (typeof fields !== 'object') throw new TypeError('mountMcp options: tools must be an object of tool spec fields (or a function returning one)')
  for (const key of Object.keys(fields)) {
    if (!OVERRIDABLE.includes(key)) throw new TypeError(`mountMcp options: tools may not set "${key}" (it may set ${OVERRIDABLE.join(', ')})`)
  }
  return fields
}

/** What the model is shown of a server's description of the tool `name`: at most MAX_DESCRIPTION characters, and
 * from a server not trusted, fenced as outside data, as an untrusted tool's output is: it reaches the model beside
 * the application's own instructions, and may try to pass for them. */
function shownDescription(text, name, trusted) {
  if (text === '') return ''
  const cut = clip(text, MAX_DESCRIPTION)
  return trusted ? cut : fenceUntrusted(name, cut)
}

/** Why a listed tool cannot be mounted, or undefined. */
function unusable(tool) {
  if (!isObject(tool)) return 'it is not an object'
  if (typeof tool.name !== 'string' || tool.name === '') return 'it has no name'
  if (!isObject(tool.inputSchema)) return 'its inputSchema is not a JSON Schema object'
  // tools/call of such a tool must be a task (`execution.taskSupport`), which the gate does not run.
  if (tool.execution?.taskSupport === 'required') return 'it runs only as an MCP task, which toolgate does not run'
  return undefined
}

/**
 * The gate's declarations for a tool: from a trusted server's annotations, read with the spec's defaults
 * (`destructiveHint` and `openWorldHint` default to true); for an untrusted server (`undefined`), a state-changing
 * tool whose output is data from outside.
 */
function declarations(annotations) {
  if (annotations === undefined) return { readOnly: false, idempotent: false, risk: 'write', untrusted: true }
  const readOnly = annotations.readOnlyHint === true
  return {
    readOnly,
    idempotent: annotations.idempotentHint === true,
    risk: readOnly ? 'read' : annotations.destructiveHint === false ? 'write' : 'destructive',
    untrusted: annotations.openWorldHint !== false,
  }
}

/** A request that failed before the server answered it, as the handler's failure. A connection that closed on
 * it is retryable only for a tool that is safe to repeat: it may have run. A closed client never reconnects by
 * itself, so a call it could not send is final. */
function requestFailure(err, server, connectionClosed, safeToRepeat) {
  const message = typeof err?.message === 'string' ? err.message : describeName(err)
  if (message === 'Not connected') return Object.assign(new Error(`MCP server "${server}" is not connected (the call was not sent)`), { retryable: false, cause: err })
  // The SDK's own code for a close; a server may send that code for its own reasons, while its client stays open.
  if (err?.code === CONNECTION_CLOSED && connectionClosed) {
    const why = `MCP server "${server}" closed the connection before answering (the call may have run: check before repeating a change)`
    return safeToRepeat ? new RetryableError(why, { cause: err }) : Object.assign(new Error(why, { cause: err }), { retryable: false })
  }
  if (err?.name === 'McpError' && malformedAnswers.has(err.data)) {
    return Object.assign(new Error(`MCP server "${server}" answered with ${malformedText(err.data)}`), { retryable: false })
  }
  if (err?.name === 'McpError') {
    // A server's own McpError arrives prefixed twice ("MCP error -32000: MCP error -32000: …"): once is enough.
    const said = message.replace(/^(MCP error -?\d+: )\1+/, '$1')
    return Object.assign(new Error(`MCP server "${server}" refused the call: ${said}`), { code: err.code, retryable: false })
  }
  // A transport that failed on the way: an HTTP status (the SDK's HTTP error carries it as its code) or a socket
  // code says whether another attempt may work, for a tool safe to repeat (a 502 or a reset may follow a call that
  // ran).
  const status = Number.isInteger(err?.code) ? err.code : undefined
  return Object.assign(new Error(`MCP server "${server}" could not be reached: ${message}`), {
    code: status === undefined ? err?.code : undefined, status, cause: err, ...(safeToRepeat ? {} : { retryable: false }),
  })
}

/**
 * The SDK's stdio transport drops a line that is not a valid JSON-RPC message, so that a malformed answer (an
 * error without a numeric code or a message, a result that is not an object) leaves its request to wait out its
 * whole limit. On such a transport, an answer (an id, no method) the SDK cannot read is made an error answer to its
 * request, which carries what the server sent (`data`). Other transports are left as they are.
 */
function readMalformedAnswers(transport) {
  const buffer = transport?._readBuffer
  if (typeof buffer?.readMessage !== 'function' || lenientBuffers.has(buffer)) return
  lenientBuffers.add(buffer)
  const read = buffer.readMessage
  buffer.readMessage = function readMessage() {
    const unread = this._buffer
    try {
      return read.call(this)
    } catch (err) {
      // The line read, which the buffer has already let go of: the bytes between what was unread and what is.
      const line = unread?.subarray(0, unread.length - (this._buffer?.length ?? 0)).toString('utf8')
      const answer = parsed(line)
      const id = answer?.id
      if (!isObject(answer) || 'method' in answer || !(typeof id === 'string' || Number.isInteger(id))) throw err
      malformedAnswers.add(answer)
      return { jsonrpc: '2.0', id, error: { code: INTERNAL_ERROR, message: malformedText(answer), data: answer } }
    }
  }
}

/** What a malformed answer holds, as a message says it: its error when it has one, or the whole answer. */
function malformedText(answer) {
  return 'error' in answer ? `a malformed JSON-RPC error: ${reprOf(answer.error)}` : `a malformed JSON-RPC response: ${reprOf(answer)}`
}

function parsed(json) {
  try {
    return JSON.parse(json)
  } catch {
    return undefined
  }
}

/** What the server answered, as the handler's value: `isError` is a failure, `structuredContent` the structure,
 * and content the text and images. */
function toolValue(result, server, hasOutputSchema) {
  if (result.isError === true) {
    const text = contentText(result.content)
    throw Object.assign(new Error(text || `MCP server "${server}" reported an error without saying what`), { retryable: false })
  }
  if (result.structuredContent != null) return result.structuredContent
  if (hasOutputSchema) throw new Error(`MCP server "${server}" returned no structuredContent, which the tool's outputSchema requires`)
  return contentValue(result.content)
}

function contentText(content) {
  const value = contentValue(content)
  if (value === undefined) return ''
  return typeof value === 'string' ? value : value.filter((part) => part.type === 'text').map((part) => part.text).join('\n')
}

/** Content parts as the gate takes them: text, or (with images) text and image parts. Audio, binary resources and
 * links, which no provider takes as a tool result, are described in a line. */
function contentValue(content) {
  const parts = []
  let images = 0
  const text = (line) => parts.push({ type: 'text', text: line })
  for (const part of Array.isArray(content) ? content : []) {
    switch (part?.type) {
      case 'text':
        text(typeof part.text === 'string' ? part.text : '')
        break
      case 'image':
        if (isImage(part.mimeType, part.data)) {
          parts.push({ type: 'image', data: part.data, mimeType: part.mimeType })
          images++
        } else text(`[image that cannot be read: ${describeMedia(part.mimeType, part.data)}]`)
        break
      case 'audio':
        text(`[audio: ${describeMedia(part.mimeType, part.data)}]`)
        break
      case 'resource': {
        const resource = isObject(part.resource) ? part.resource : {}
        const uri = typeof resource.uri === 'string' ? resource.uri : '(no uri)'
        if (typeof resource.text === 'string') text(`[resource ${uri}${typeof resource.mimeType === 'string' ? ` (${resource.mimeType})` : ''}]\n${resource.text}`)
        else if (isImage(resource.mimeType, resource.blob)) {
          parts.push({ type: 'image', data: resource.blob, mimeType: resource.mimeType })
          images++
        } else text(`[resource ${uri}: ${describeMedia(resource.mimeType, resource.blob)}]`)
        break
      }
      case 'resource_link': {
        const name = typeof part.title === 'string' ? part.title : typeof part.name === 'string' ? part.name : ''
        const mime = typeof part.mimeType === 'string' ? ` (${part.mimeType})` : ''
        const description = typeof part.description === 'string' ? `\n${part.description}` : ''
        text(`[resource link: ${name ? `${name} ` : ''}<${describeName(part.uri)}>${mime}]${description}`)
        break
      }
      default:
        text(`[content of type ${describeName(part?.type).slice(0, 100)} left out]`)
    }
  }
  if (parts.length === 0) return undefined
  return images > 0 ? parts : parts.map((part) => part.text).join('\n')
}

const BASE64 = /^[A-Za-z0-9+/=\r\n]*$/

function isImage(mimeType, data) {
  return typeof mimeType === 'string' && mimeType.startsWith('image/') && typeof data === 'string' && data !== '' && BASE64.test(data)
}

function describeMedia(mimeType, data) {
  const type = typeof mimeType === 'string' ? mimeType : 'no media type'
  if (typeof data !== 'string') return `${type}, no data`
  const padding = data.endsWith('==') ? 2 : data.endsWith('=') ? 1 : 0
  return `${type}, ${Math.floor(data.length / 4) * 3 - padding} bytes`
}

/** A value a server sent where a string belongs, as text: never throws (`{ toString: 1 }` cannot be made one). */
function describeName(value) {
  if (typeof value === 'string') return value
  try {
    return JSON.stringify(value) ?? typeof value
  } catch {
    return typeof value
  }
}

function isObject(value) {
  return value !== null && typeof value === 'object' && !Array.isArray(value)
}

/** What `fn` returns, or undefined when it throws: an application's callback never breaks the mount. */
function safely(fn) {
  try {
    return fn()
  } catch {
    return undefined
  }
}

module.exports = { mountMcp }
