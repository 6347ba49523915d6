// Types of the testing kit: lib/testing/mocks.js, model.js and assertions.js.

import type {
  AISDKToolCall,
  AISDKToolMessage,
  AnthropicToolUse,
  AnthropicUserMessage,
  BedrockToolUseBlock,
  BedrockUserMessage,
  ErrorKind,
  ExecutionContext,
  GeminiFunctionCallPart,
  GeminiFunctionResponseContent,
  OpenAIChatToolCall,
  OpenAIChatToolMessage,
  OpenAIFunctionCallOutput,
  OpenAIResponsesFunctionCall,
  ResultFormat,
  StreamFormat,
  ToolCall,
  ToolContext,
  ToolExecutor,
  ToolResult,
} from '../../index.js'
import type { ManualClock } from './index.js'

// ---- mocks.js

/** One call a mock received. The abort fields change when the call's signal aborts, even after it was answered. */
export interface MockCall {
  /** The arguments the gate passed (validated, repaired). */
  args: Record<string, unknown>
  callId: string
  /** 1 for the first attempt, 2 for the first retry, … */
  attempt: number
  /** When the handler was called, in ms since the epoch (real time, whatever fake timers say). */
  startedAt: number
  /** True once `ctx.signal` aborted. */
  signalAborted: boolean
  /** When the signal aborted, in ms since the handler was called; undefined until then. */
  abortedAt: number | undefined
  /** The signal's reason (a `TimeoutError` DOMException at a limit, the caller's reason on cancellation). */
  abortReason: unknown
}

/**
 * A handler for `gate.register({ name, handler })`, whatever the tool's arguments and context, that records every
 * call. `Return` is what it returns (a Promise for the ones that wait; `never` for those that never return).
 */
export interface MockHandler<Return = unknown> {
  <Ctx = ExecutionContext>(args: unknown, ctx: ToolContext<Ctx>): Return
  /** Every call so far, in order. */
  readonly calls: MockCall[]
  /** Forgets the calls (a `flaky` mock fails its first `n` calls again). */
  reset(): void
}

/** Time as the waiting mocks read it: resolve after `ms`, or reject with `signal.reason` once it aborts. */
export interface MockClock {
  sleep(ms: number, signal?: AbortSignal): Promise<void>
}
export interface MockClockOptions {
  /** Default: the real timers, taken when the kit loaded (fake timers installed later do not affect them). */
  clock?: MockClock
}

/** Returns `value`. */
export declare function ok<T = undefined>(value?: T): MockHandler<T>
/** Throws `error` synchronously; a message becomes an `Error`. Default: `Error('mock failure')`. */
export declare function throws(error?: Error | string): MockHandler<never>
/** Rejects with exactly `value`, an Error or not, `undefined` included. */
export declare function rejectsWith(value: unknown): MockHandler<Promise<never>>
/** Never settles until its signal aborts, then rejects with the signal's reason. */
export declare function hangs(): MockHandler<Promise<never>>
/** Never settles, even when its signal aborts (the abort is recorded all the same). Close the gate with a short
 * `timeoutMs`: `close()` waits for such handlers. */
export declare function hangsIgnoringSignal(): MockHandler<Promise<never>>
/** Resolves to `value` after `ms`; rejects with the signal's reason when aborted first. */
export declare function slow<T = undefined>(ms: number, value?: T, options?: MockClockOptions): MockHandler<Promise<T>>
/**
 * Fails its first `n` calls (across attempts and turns, until `reset()`), then returns `value`. The default error
 * is a `RetryableError`, so the gate's retry policy applies; a message becomes a `RetryableError`; an Error is
 * thrown as it is (retried only if it says so).
 */
export declare function flaky<T = undefined>(n: number, error?: Error | string, value?: T): MockHandler<T>
/** Returns a string of exactly `chars` characters. */
export declare function huge(chars: number): MockHandler<string>
export interface ProgressThenSilenceOptions extends MockClockOptions {
  /** Time between two `ctx.progress()` calls. Default 0. */
  everyMs?: number
}
/** Calls `ctx.progress(1)` … `ctx.progress(steps)`, then never settles until its signal aborts (then rejects with
 * its reason): for idle limits. */
export declare function progressThenSilence(steps: number, options?: ProgressThenSilenceOptions): MockHandler<Promise<never>>

export type SecretKind = 'aws' | 'github' | 'openai' | 'jwt' | 'private-key' | 'password'
/** The built-in redaction rule that catches each kind, as `metadata.redactions` names it. */
export interface SecretRules {
  aws: 'aws-access-key-id'
  github: 'github-token'
  openai: 'openai-api-key'
  jwt: 'jwt'
  'private-key': 'private-key'
  password: 'secret-assignment'
}
/** A mock that returns a text holding a realistic fake secret of kind `K`. */
export interface LeakingHandler<K extends SecretKind = SecretKind> extends MockHandler<string> {
  /** The secret in the text: it must not reach the model. */
  readonly secret: string
  readonly rule: SecretRules[K]
}
/** Returns a text holding a realistic fake secret of `kind`; throws a TypeError for an unknown kind. */
export declare function leaksSecret<K extends SecretKind>(kind: K): LeakingHandler<K>

// ---- model.js

/** A scripted model turn: tool calls (any shape `execute` takes) and maybe text, or a string: a final answer. */
export type ScriptedTurn = string | { calls?: readonly ToolCall[]; text?: string }
/** A model turn as `respond` gives it: no calls ends the agent loop. */
export interface ModelTurn {
  calls: readonly ToolCall[]
  text?: string
}
/** What `runAgentLoop` asks for turns. */
export interface AgentModel {
  /** `signal`: the run's, for a model that can stop early. */
  respond(messages: unknown[], options?: { signal?: AbortSignal }): ModelTurn | PromiseLike<ModelTurn>
}
/** How a scripted model streams a turn: in `format`'s stream events, one every `everyMs` (default 0) on `clock` (a
 * `manualClock()`; real time without one). */
export interface ScriptedStream {
  format: StreamFormat
  clock?: ManualClock
  everyMs?: number
}
export interface ScriptedModel extends AgentModel {
  /**
   * The next turn of the script; rejects when the script is exhausted. With `stream`, the turn also comes as that
   * format's stream events (`events`): its text, then each call with its arguments in pieces.
   */
  respond(messages: unknown[], options?: { signal?: AbortSignal; stream?: ScriptedStream }): Promise<ModelTurn & { events?: AsyncIterable<unknown> }>
  /**
   * The next turn of the script as `options.format`'s stream events, for `turn.tap(stream, format)`; a call without
   * an id gets one. Throws a TypeError for an unknown format, and an Error when the script is exhausted.
   */
  stream(messages: unknown[], options: ScriptedStream): AsyncIterable<unknown>
  /** A deep copy of the messages of every request, in order (the one that found the script exhausted too). */
  readonly requests: unknown[][]
}
/** A model that replays `turns`, one per request. Throws a TypeError for a turn that is no string or `{ calls }`. */
export declare function scriptedModel(turns: readonly ScriptedTurn[]): ScriptedModel

export interface UserPrompt {
  role: 'user'
  content: string
}
export interface TextPart {
  type: 'text'
  text: string
}
/** What a transcript holds, per format: the prompt, assistant turns (calls in the format's shape) and results. */
export interface TranscriptEntries {
  anthropic: UserPrompt | { role: 'assistant'; content: (TextPart | AnthropicToolUse)[] } | AnthropicUserMessage
  'openai-responses':
    | UserPrompt
    | { type: 'message'; role: 'assistant'; content: { type: 'output_text'; text: string }[] }
    | OpenAIResponsesFunctionCall
    | OpenAIFunctionCallOutput
  'openai-chat':
    | UserPrompt
    | { role: 'assistant'; content: string | null; tool_calls: OpenAIChatToolCall[] }
    | { role: 'assistant'; content: string | undefined }
    | OpenAIChatToolMessage
  'ai-sdk': UserPrompt | { role: 'assistant'; content: (TextPart | AISDKToolCall)[] } | AISDKToolMessage
  gemini:
    | { role: 'user'; parts: { text: string }[] }
    | { role: 'model'; parts: ({ text: string } | GeminiFunctionCallPart)[] }
    | GeminiFunctionResponseContent
  bedrock:
    | { role: 'user'; content: { text: string }[] }
    | { role: 'assistant'; content: ({ text: string } | BedrockToolUseBlock)[] }
    | BedrockUserMessage
}

export interface AgentLoopOptions<F extends ResultFormat = ResultFormat, Ctx = ExecutionContext> {
  format: F
  /** Passed to every `execute`. */
  context?: Ctx
  signal?: AbortSignal
  /** Model turns before the loop gives up with an Error. Default 20. */
  maxTurns?: number
  /** The user message that starts the conversation. Default 'Go.'. */
  prompt?: string
  /**
   * Each turn streamed: the model writes it as the format's stream events (a `scriptedModel`, or a model whose
   * `respond` gives `events`) and its calls run in a streaming turn as they arrive (`gate.turn()`, `tap`). Not for
   * 'ai-sdk', which streams through `streamText`.
   */
  stream?: boolean | Omit<ScriptedStream, 'format'>
}
export interface AgentLoopResult<F extends ResultFormat = ResultFormat> {
  /** The conversation in `format`'s shape: prompt, then each turn's assistant message(s) and results, then the
   * final answer. */
  transcript: TranscriptEntries[F][]
  /** Each turn that had calls: the calls as the model gave them and the gate's results, in order. */
  turns: { calls: readonly ToolCall[]; results: ToolResult[] }[]
  /** The final turn's text. */
  text: string | undefined
}
/**
 * The usual agent loop: asks `model` for turns until one has no calls, running each turn's calls through `gate`.
 * Rejects with a TypeError for an unknown format, and with an Error after `maxTurns` turns that all had calls.
 */
export declare function runAgentLoop<F extends ResultFormat, Ctx extends ExecutionContext = ExecutionContext>(
  gate: ToolExecutor<Ctx>,
  model: AgentModel,
  options: AgentLoopOptions<F, Ctx>,
): Promise<AgentLoopResult<F>>

// ---- assertions.js

/** Checks of one result; each throws node:assert's AssertionError when it fails and returns the expectation, so
 * checks chain. A mistake in the test itself (not a ToolResult, an unknown kind) throws a TypeError. */
export interface ResultExpectation {
  /** `success`, and with `output`: exactly that output, or one matching the RegExp. */
  toSucceed(output?: string | RegExp): ResultExpectation
  /** A failure of `kind`, and with `fragment`: an error containing that text, or matching the RegExp. */
  toFailWith(kind: ErrorKind, fragment?: string | RegExp): ResultExpectation
  /** Retried `n` times: `attempts === n + 1`. */
  toHaveRetried(n: number): ResultExpectation
  toBeCached(): ResultExpectation
  toBeTruncated(): ResultExpectation
}
export declare function expectResult(result: ToolResult): ResultExpectation

/** What a vitest or jest matcher returns. */
export interface MatcherResult {
  pass: boolean
  message: () => string
}
/** `expect.extend(toolgateMatchers)`: the same checks as `expectResult`, `.not` included. */
export declare const toolgateMatchers: {
  toSucceed(received: unknown, output?: string | RegExp): MatcherResult
  toFailWith(received: unknown, kind: ErrorKind, fragment?: string | RegExp): MatcherResult
  toHaveRetried(received: unknown, n: number): MatcherResult
  toBeCached(received: unknown): MatcherResult
  toBeTruncated(received: unknown): MatcherResult
}
/**
 * The matchers as `expect(result)` offers them after `expect.extend(toolgateMatchers)`. Add them to your runner's
 * types, e.g. for vitest 4: `declare module 'vitest' { interface Assertion<T> extends ToolgateMatchers<T> {} }`; for
 * vitest 5: `declare module 'vitest' { interface Matchers<R extends void | Promise<void> = void | Promise<void>, T =
 * unknown> extends ToolgateMatchers<R> {} }`.
 */
export interface ToolgateMatchers<R = unknown> {
  toSucceed(output?: string | RegExp): R
  toFailWith(kind: ErrorKind, fragment?: string | RegExp): R
  toHaveRetried(n: number): R
  toBeCached(): R
  toBeTruncated(): R
}
