'use strict'
// Command tools as the programmer declares them: the spec read and checked, each call's invocation (argv or shell,
// cwd, the whole environment, stdin) built from the tool's `command(args)`, and the job tools. The engine spawns,
// reads and stops the processes (crates/core/src/command/).

const { reprOf } = require('./engine/describe.js')

/** The keys of `registerCommand` that describe the process; the rest are a tool's. */
const COMMAND_FIELDS = ['command', 'cwd', 'env', 'inheritEnv', 'killGraceMs', 'onTimeout', 'captureBytes', 'spillBytes', 'failOnExitCode', 'jobTimeoutMs']
/** What the engine keeps of them. */
const ENGINE_FIELDS = ['killGraceMs', 'onTimeout', 'captureBytes', 'spillBytes', 'failOnExitCode', 'jobTimeoutMs']
/** What a command gets of the server's environment unless the tool names more: enough to find programs and run in
 * the user's locale and home; no credentials. */
const SAFE_ENV = ['PATH', 'HOME', 'USER', 'LOGNAME', 'SHELL', 'LANG', 'LANGUAGE', 'LC_ALL', 'LC_CTYPE', 'LC_MESSAGES', 'TERM', 'TZ', 'TMPDIR']
/** The most characters `job_output` returns per call. */
const JOB_PAGE_BYTES = 20_000

/**
 * Reads a `registerCommand` spec: the tool's own fields, what the engine keeps of the process's limits, and how a
 * call's invocation is built. Throws at once on what cannot work.
 */
function readCommandSpec(spec, platform) {
  if (spec === null || typeof spec !== 'object') throw new TypeError('registerCommand(spec): spec must be an object')
  const what = `registerCommand: tool "${spec.name}"`
  if (platform === 'win32') {
    throw new TypeError(`${what}: command tools run only on Linux and macOS (stopping a command's whole process tree on Windows needs Job Objects, which toolgate does not use yet)`)
  }
  if (spec.handler !== undefined) throw new TypeError(`${what}: a command tool has no handler; its command(args) says what to run`)
  // The tool's own keys are checked as `register` checks them.
  const fields = Object.fromEntries(COMMAND_FIELDS.filter((key) => spec[key] !== undefined).map((key) => [key, spec[key]]))
  const tool = Object.fromEntries(Object.entries(spec).filter(([key]) => !COMMAND_FIELDS.includes(key)))
  if (typeof fields.command !== 'function') throw new TypeError(`${what}: command must be a function (args) => ({ argv }) or ({ shell })`)
  if (fields.cwd !== undefined && typeof fields.cwd !== 'string') throw new TypeError(`${what}: cwd must be a string`)
  const env = readEnv(fields.env, `${what}: env`)
  const inherit = readInherit(fields.inheritEnv, what)
  if (fields.onTimeout !== undefined && fields.onTimeout !== 'kill' && fields.onTimeout !== 'background') {
    throw new TypeError(`${what}: onTimeout must be 'kill' or 'background'; got ${reprOf(fields.onTimeout)}`)
  }
  const limits = {}
  for (const key of ENGINE_FIELDS) if (fields[key] !== undefined) limits[key] = fields[key]
  return {
    tool,
    limits,
    background: fields.onTimeout === 'background',
    invocation: (args, ctx) => invocationOf(fields.command, args, ctx, { cwd: fields.cwd, env, inherit }, what),
  }
}

function readEnv(env, what) {
  if (env === undefined) return {}
  if (env === null || typeof env !== 'object' || Array.isArray(env)) throw new TypeError(`${what} must be an object of strings`)
  for (const [key, value] of Object.entries(env)) {
    if (typeof value !== 'string') throw new TypeError(`${what}.${key} must be a string; got ${reprOf(value)}`)
  }
  return env
}

/** The names of the server's environment a command inherits: all (`true`), none (`false`), or the safe set plus
 * those named. */
function readInherit(inheritEnv, what) {
  if (inheritEnv === undefined) return SAFE_ENV
  if (inheritEnv === true || inheritEnv === false) return inheritEnv
  if (Array.isArray(inheritEnv) && inheritEnv.every((name) => typeof name === 'string')) return [...SAFE_ENV, ...inheritEnv]
  throw new TypeError(`${what}: inheritEnv must be true, false or a list of variable names`)
}

/** A call's invocation as JSON for the engine; rejects (the call fails) when `command(args)` fails or gives
 * something that cannot run. Read from `process.env` at each call, so a worker thread's own environment counts. */
async function invocationOf(command, args, ctx, tool, what) {
  const given = await command(args, ctx)
  if (given === null || typeof given !== 'object') throw new TypeError(`${what}: command(args) must return { argv } or { shell }; got ${reprOf(given)}`)
  const { argv, shell, cwd = tool.cwd, env, stdin } = given
  if (argv !== undefined && !(Array.isArray(argv) && argv.length > 0 && argv.every((a) => typeof a === 'string'))) {
    throw new TypeError(`${what}: command(args).argv must be a non-empty list of strings; got ${reprOf(argv)}`)
  }
  if (shell !== undefined && typeof shell !== 'string') throw new TypeError(`${what}: command(args).shell must be a string; got ${reprOf(shell)}`)
  if ((argv === undefined) === (shell === undefined)) throw new TypeError(`${what}: command(args) must return either argv or shell`)
  if (cwd !== undefined && typeof cwd !== 'string') throw new TypeError(`${what}: command(args).cwd must be a string`)
  if (stdin !== undefined && typeof stdin !== 'string') throw new TypeError(`${what}: command(args).stdin must be a string`)
  const whole = {}
  const inherited = tool.inherit === true ? Object.keys(process.env) : tool.inherit === false ? [] : tool.inherit
  for (const name of inherited) if (typeof process.env[name] === 'string') whole[name] = process.env[name]
  Object.assign(whole, tool.env, readEnv(env, `${what}: command(args).env`))
  return JSON.stringify({ argv, shell, cwd, env: whole, stdin })
}

/** The job tools' specs: `job_status`, `job_output` and `job_kill`, over `jobs` (the executor's engine calls). */
function jobToolSpecs(jobs) {
  const jobId = { type: 'integer', minimum: 1, description: 'The job id a command result gave.' }
  return [
    {
      name: 'job_status',
      description: 'Whether a background job (a command moved to the background when it ran long) is still running, ' +
        'and how it ended: exit code or signal, duration, how much output it wrote.',
      parameters: { type: 'object', properties: { jobId }, required: ['jobId'], additionalProperties: false },
      readOnly: true,
      handler: ({ jobId }) => JSON.parse(jobs.status(jobId)),
    },
    {
      name: 'job_output',
      description: 'Read what a background job wrote, a page at a time: from byte offset (0 = the start), ' +
        'up to limit bytes. The answer gives nextOffset to read on; call again later for what it writes next.',
      parameters: {
        type: 'object',
        properties: {
          jobId,
          stream: { type: 'string', enum: ['stdout', 'stderr'], description: 'Which output to read (default stdout).' },
          offset: { type: 'integer', minimum: 0, description: 'The first byte to read (default 0).' },
          limit: { type: 'integer', minimum: 1, maximum: JOB_PAGE_BYTES, description: 'How many bytes to read (default 10000).' },
        },
        required: ['jobId'],
        additionalProperties: false,
      },
      readOnly: true,
      maxOutputChars: JOB_PAGE_BYTES * 2,
      handler: ({ jobId, stream = 'stdout', offset = 0, limit = 10_000 }) => JSON.parse(jobs.output(jobId, stream, offset, limit)),
    },
    {
      name: 'job_kill',
      description: 'Stop a background job and everything it started (SIGTERM, then SIGKILL after a grace period). ' +
        'Answers once it has ended, with how it ended.',
      parameters: { type: 'object', properties: { jobId }, required: ['jobId'], additionalProperties: false },
      handler: async ({ jobId }, { signal }) => {
        jobs.kill(jobId)
        await jobs.ended(jobId, signal)
        return JSON.parse(jobs.status(jobId))
      },
    },
  ]
}

module.exports = { readCommandSpec, jobToolSpecs, SAFE_ENV }
