import type { ToolExecutor } from '../../index.js'

export interface DevtoolsOptions {
  /** The port to listen on; 0 (the default) takes a free one. */
  port?: number
  /** The address to listen on: '127.0.0.1' unless told otherwise. Another address lets other machines reach the
   * page (the token still guards it). */
  host?: string
  /** Calls that ask for approval wait on the page as well as on the application's `approve` callback (which need not
   * be set): the first answer decides. Default false. */
  approvals?: boolean
  /** Turns kept for a page that opens later or reloads, the oldest forgotten first. Default 200. */
  keepTurns?: number
}

export interface Devtools {
  /** The page, with its token: `http://127.0.0.1:<port>/?token=<random>`. */
  readonly url: string
  /** Stops watching and serving; pages attached are let go. */
  close(): Promise<void>
}

/**
 * Serves a local page that watches the gates' turns live (each call's phases as they happen, its story), answers
 * approvals (with `approvals: true`), shows their health and replays a recording against them. Nothing is watched
 * until a page is attached.
 */
export declare function devtools(gates: ToolExecutor<any> | readonly ToolExecutor<any>[], options?: DevtoolsOptions): Promise<Devtools>
