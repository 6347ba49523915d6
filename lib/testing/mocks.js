'use strict'
// Ready-made handlers with the behaviours that break agents: each records its calls, so a test can check what the
// gate did to the handler (how often it ran, with what, whether and when its signal was aborted).

// Fake timers replace the timers (on globalThis and on the `node:timers` module object) and Date.now when
// installed: taken now, the mocks keep real time whatever a test does to the clock later.
const { setTimeout: realSetTimeout, clearTimeout: realClearTimeout } = require('node:timers')
const realNow = Date.now
const { RetryableError } = require('../../index.js')
const { sleepOn } = require('./clock.js')

/** A promise that rejects with the signal's reason once it is aborted. */
function untilAborted(signal) {
  return new Promise((_resolve, reject) => {
    if (signal.aborted) reject(signal.reason)
    else signal.addEventListener('abort', () => reject(signal.reason), { once: true })
  })
}

/** The clock of a mock given none: real timers, the signal honoured. */
const REAL_CLOCK = {
  sleep: (ms, signal) => sleepOn({ setTimeout: realSetTimeout, clearTimeout: realClearTimeout }, ms, signal),
}

/**
 * A handler that records each call, then does what `behaviour(args, ctx, calls)` does. The record's abort fields
 * are filled in when the signal aborts, even after the call was answered (a handler the gate gave up on).
 */
function recorded(behaviour) {
  const calls = []
  const handler = (args, ctx) => {
    const startedAt = realNow()
    const record = { args, callId: ctx.callId, attempt: ctx.attempt, startedAt, signalAborted: false, abortedAt: undefined, abortReason: undefined }
    const { signal } = ctx
    const noteAbort = () => {
      record.signalAborted = true
      record.abortedAt = realNow() - startedAt
      record.abortReason = signal.reason
    }
    if (signal.aborted) noteAbort()
    else signal.addEventListener('abort', noteAbort, { once: true })
    calls.push(record)
    return behaviour(args, ctx, calls)
  }
  handler.calls = calls
  handler.reset = () => {
    calls.length = 0
  }
  return handler
}

/** An Error as given, or a message made into one of `ErrorClass`. */
const asError = (error, ErrorClass) => (error instanceof Error ? error : new ErrorClass(String(error)))

/** Returns `value`. */
const ok = (value) => recorded(() => value)

/** Throws `error` (an Error, or a message for a new Error), synchronously. */
function throws(error = 'mock failure') {
  const thrown = asError(error, Error)
  return recorded(() => {
    throw thrown
  })
}

/** Rejects with exactly `value`: undefined, a string, an object, anything a careless library rejects with. */
const rejectsWith = (value) => recorded(() => Promise.reject(value))

/** Never settles until its signal aborts, then rejects with the signal's reason (a handler that listens). */
const hangs = () => recorded((_args, ctx) => untilAborted(ctx.signal))

/** Never settles, whatever happens to its signal (a handler that does not listen); the abort is recorded anyway. */
const hangsIgnoringSignal = () => recorded(() => new Promise(() => {}))

/** Resolves to `value` after `ms`; rejects with the signal's reason when aborted first. */
const slow = (ms, value, { clock = REAL_CLOCK } = {}) =>
  recorded(async (_args, ctx) => {
    await clock.sleep(ms, ctx.signal)
    return value
  })

/**
 * Fails its first `n` calls (counted across attempts and turns, until `reset()`) with `error`, then returns
 * `value`. The default error is a RetryableError, so the gate's retry policy applies; a message becomes one too.
 */
const flaky = (n, error, value) =>
  recorded((_args, _ctx, calls) => {
    if (calls.length > n) return value
    throw error === undefined ? new RetryableError(`flaky: call ${calls.length} of the first ${n} fails`) : asError(error, RetryableError)
  })

/** Returns a string of exactly `chars` characters (plain ASCII text, built once). */
function huge(chars) {
  const line = 'A long line of tool output, repeated to flood the context.\n'
  const text = line.repeat(Math.ceil(chars / line.length)).slice(0, chars)
  return recorded(() => text)
}

/**
 * Calls `ctx.progress(1)` … `ctx.progress(steps)`, `everyMs` apart (default 0: one after another), then goes
 * silent until its signal aborts: a handler that starts well and then stalls, for idle limits.
 */
const progressThenSilence = (steps, { everyMs = 0, clock = REAL_CLOCK } = {}) =>
  recorded(async (_args, ctx) => {
    for (let step = 1; step <= steps; step++) {
      if (step > 1) await clock.sleep(everyMs, ctx.signal)
      ctx.progress(step)
    }
    return untilAborted(ctx.signal)
  })

/** Fake secrets of real shapes (none is a live credential), and the built-in redaction rule that catches each. */
const SECRETS = {
  aws: { rule: 'aws-access-key-id', secret: 'AKIAQX4TZ7RW2NB5KD3M', text: (s) => `export AWS_ACCESS_KEY_ID ${s}` },
  github: { rule: 'github-token', secret: 'ghp_Wd8kQ3xN7vB2mL5pR9tZ4yH6jF1sG0cA3eK7', text: (s) => `remote: https://github.com (token ${s})` },
  openai: { rule: 'openai-api-key', secret: 'sk-proj-Hn4vK8qL2xW7mT5zR9pB3yJ6dF1gS0cA8eU4iO7tY2qW6rE9nM3kL1xP5vB8zH3jS7dF0gA2', text: (s) => `client = OpenAI(api_key ${s})` },
  jwt: {
    rule: 'jwt',
    secret: 'eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJ1XzQyIiwicm9sZSI6ImFkbWluIiwiaWF0IjoxNzI1MDAwMDAwfQ.Qm9zS3Zn7Kx2pL8vT4wN6yB1hJ5sF3dG9aC0eU7iO2r',
    text: (s) => `session cookie: ${s}`,
  },
  'private-key': {
    rule: 'private-key',
    secret: '-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEAx7Kq2mVn8pLw3Tz9Rb4Yc6Jh1Sf5Dg0Ac8Eu3Io7Ty2Qw6Re9\nNm4Kl1Xp5Vb8Zh3Js7Df0Ga2Hn4Vk8Ql2Xw7Mt5Zr9Pb3Yj6Df1Gs0Ca8Eu4Io7T\n-----END RSA PRIVATE KEY-----',
    text: (s) => `id_rsa:\n${s}\n`,
  },
  password: { rule: 'secret-assignment', secret: 'Vq7#Lm2xTz9pKw4R', text: (s) => `DATABASE_HOST=db.internal\npassword=${s}\n` },
}

/**
 * Returns a text holding a realistic fake secret of `kind`. The handler carries `secret` (to check it never reaches
 * the model) and `rule` (the built-in rule that redacts it, as `metadata.redactions` names it).
 */
function leaksSecret(kind) {
  if (!Object.hasOwn(SECRETS, kind)) throw new TypeError(`leaksSecret(kind): kind must be one of ${Object.keys(SECRETS).join(', ')}; got ${String(kind)}`)
  const leak = SECRETS[kind]
  const text = leak.text(leak.secret)
  return Object.assign(recorded(() => text), { secret: leak.secret, rule: leak.rule })
}

module.exports = { ok, throws, rejectsWith, hangs, hangsIgnoringSignal, slow, flaky, huge, progressThenSilence, leaksSecret }
