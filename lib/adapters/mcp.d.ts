// Types of toolgate/mcp. The client and transport are typed by what the adapter calls, so that either build of
// @modelcontextprotocol/sdk (CommonJS or ESM, whose classes TypeScript tells apart) fits.
import type { IncomingMessage, ServerResponse } from 'node:http'
import type { Server } from '@modelcontextprotocol/sdk/server/index.js'
import type { RequestHandlerExtra } from '@modelcontextprotocol/sdk/shared/protocol.js'
import type { ServerNotification, ServerRequest, Tool } from '@modelcontextprotocol/sdk/types.js'
import type { ExecutionContext, ToolExecutor, ToolSpec } from '../../index.js'

/** What `mountMcp` needs of a connected `Client` of @modelcontextprotocol/sdk. */
export interface McpClient {
  // `any`: the zod schemas and results of either build of the SDK.
  request(request: { method: string; params?: Record<string, unknown> }, resultSchema: any, options?: object): Promise<any>
  setNotificationHandler(schema: any, handler: (notification: any) => void | Promise<void>): void
  removeNotificationHandler(method: string): void
  getServerVersion(): { name: string; version: string } | undefined
  /** Unset once the connection closed. */
  readonly transport: unknown
}

/** What a mount may set on each of its tools, on top of what it reads off the server. */
export type McpToolFields = Partial<Pick<ToolSpec,
  | 'timeoutMs' | 'idleTimeoutMs' | 'retry' | 'maxConcurrency' | 'cache' | 'dedup' | 'rateLimit' | 'maxOutputChars'
  | 'untrusted' | 'aliases' | 'rollbackWhen' | 'needsApproval' | 'risk' | 'check' | 'pathWithin' | 'urlHosts'
  | 'readOnly' | 'idempotent'>>

export interface MountMcpOptions {
  /** Put before each tool's name with `__` (default: the server's name; `''`: none). */
  prefix?: string
  /** The server's tools to mount: their names (`*` globs) or a predicate (default: all). */
  include?: string[] | ((tool: Tool) => boolean)
  /** The server's tools to leave out, as `include`. */
  exclude?: string[] | ((tool: Tool) => boolean)
  /**
   * Read the server's annotations as declarations (default false): `readOnlyHint` → `readOnly`, `idempotentHint`
   * → `idempotent`, `destructiveHint` → risk `destructive`, `openWorldHint` → `untrusted`. Untrusted, every tool
   * is a state-changing write whose description and output are fenced as outside data; the annotations are in
   * `list()`'s `origin`.
   */
  trust?: boolean
  /** Spec fields for every mounted tool (timeouts, rate limits, approval…), or per tool. Mounted tools are never
   * cached unless these say so (`cache: { ttlMs }`): MCP's `idempotentHint` says nothing of a result staying true. */
  tools?: McpToolFields | ((tool: Tool & { mappedName: string }) => McpToolFields | undefined)
  /** How long each `tools/list` page may take. Default 60 000. */
  listTimeoutMs?: number
  /** After the gate was brought in step with a `notifications/tools/list_changed`. */
  onToolsChanged?: (mount: McpMount) => void
  /** A re-listing after `list_changed` failed (default: a process warning); the tools stay as they were. */
  onError?: (error: unknown) => void
}

export interface McpMount {
  /** The server's name, as it gave it. */
  readonly server: string
  /** What the gate's names of this server's tools start with (before `__`). */
  readonly prefix: string
  /** The mounted tools: the gate's name and the server's. */
  readonly tools: { name: string; mcpName: string }[]
  /** The server's tools the last listing did not mount and why: a schema that does not compile or is nested too
   * deeply to read, a name already taken, a task-only tool, anything else the gate refused. */
  readonly skipped: { mcpName: string; reason: string }[]
  nameOf(mcpName: string): string | undefined
  mcpNameOf(name: string): string | undefined
  /** Lists the server's tools again and brings the gate in step (done by itself on `list_changed`). */
  refresh(): Promise<void>
  /** Unregisters the mounted tools and stops following the server's changes. */
  unmount(): void
}

/**
 * Registers the tools of the MCP server `client` is connected to, each calling `tools/call` under the gate's
 * limits: its signal cancels the request, the server's progress restarts the idle limit, the total limit holds
 * whatever the server sends. `isError` is a `handler_error` with the server's text; `structuredContent` is the
 * structured output (checked against the tool's `outputSchema`); a dropped connection is a retryable failure.
 * Rejects when the server cannot list its tools.
 */
export declare function mountMcp(gate: ToolExecutor<any>, client: McpClient, options?: MountMcpOptions): Promise<McpMount>

/** The request a `tools/list` or `tools/call` came in: its session, its auth info. */
export type McpRequestExtra = RequestHandlerExtra<ServerRequest, ServerNotification>

export interface ServeMcpOptions<Ctx extends ExecutionContext = ExecutionContext> {
  /** The gate's context for every request (it filters the tools listed too), or one per request. */
  context?: Ctx | ((extra: McpRequestExtra) => Ctx | Promise<Ctx>)
  /** The server's name in `initialize` (default 'toolgate'). */
  name?: string
  version?: string
  instructions?: string
}

/** What an MCP transport offers (StdioServerTransport, StreamableHTTPServerTransport, …). */
export interface McpTransport {
  start(): Promise<void>
  send(message: any, options?: any): Promise<void>
  close(): Promise<void>
}

export interface McpServing {
  /** The SDK's low-level Server answering for the gate. */
  server: Server
  /** Tells the client the tools changed (after `register` or `unregister`). */
  toolsChanged(): Promise<void>
  close(): Promise<void>
}

/**
 * Serves the gate's tools as an MCP server over `transport`: `tools/list` from `list()` (JSON Schemas, annotations
 * from the declarations), each `tools/call` one turn of the gate with the request's cancellation, progress from
 * `ctx.progress()`, approvals asked of the client's user by elicitation (denied when it has none), and failures as
 * `isError` results in the gate's wording.
 */
export declare function serveMcp<Ctx extends ExecutionContext>(gate: ToolExecutor<Ctx>, transport: McpTransport, options?: ServeMcpOptions<Ctx>): Promise<McpServing>

export interface McpHttpHandlerOptions<Ctx extends ExecutionContext = ExecutionContext> extends ServeMcpOptions<Ctx> {
  /** Sessions held at once; past it the least recently used closes. Default 1000. */
  maxSessions?: number
  /** How long a session may stay unused before it closes. Default 30 min. */
  sessionIdleMs?: number
  /**
   * The Host headers answered (DNS-rebinding protection): a name on any port (`'mcp.example.com'`), or on one port
   * (`'10.0.0.5:3000'`). Default: `localhost`, `127.0.0.1` and `[::1]`. Any other Host is answered 403.
   */
  allowedHosts?: string[]
  /**
   * Origins answered besides the request's own (`'https://app.example.com'`). A request with any other Origin is
   * answered 403; one without (a client other than a browser) is served.
   */
  allowedOrigins?: string[]
}

export interface McpHttpHandler {
  (req: IncomingMessage, res: ServerResponse, parsedBody?: unknown): Promise<void>
  /** Ends every session; later requests get 503. */
  close(): Promise<void>
  /** Tells every session's client the tools changed (after `register` or `unregister`). */
  toolsChanged(): Promise<void>
  /** Sessions open now. */
  readonly sessions: number
}

/** A Streamable HTTP endpoint for node:http or Express (pass Express's parsed body as `parsedBody`): each client
 * session, begun by `initialize`, gets its own server over the gate. */
export declare function mcpHttpHandler<Ctx extends ExecutionContext>(gate: ToolExecutor<Ctx>, options?: McpHttpHandlerOptions<Ctx>): McpHttpHandler
