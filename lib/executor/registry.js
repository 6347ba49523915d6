'use strict'
// The tools as the JS layer keeps them beside the engine's registry: each one's handler and the functions of its
// spec that run in JS (rollbackWhen, check, cost, a schema's own validations, zod's pruning), a spec read into the
// fields the engine registers, and what a handler receives as its arguments.

const { policyJson } = require('../engine/wire.js')
const { SPEC_FIELDS, finiteNumbers, offAsOptions, pick } = require('../options.js')
const { toolSchema, validationResult } = require('../schemas.js')
const { lookUntil } = require('./lifecycle.js')

/** The most characters `read_artifact` returns per call (the engine's cap), and room for its header. */
const ARTIFACT_PAGE_CHARS = 20_000

/** The maps the registry keeps per tool name. */
const PER_TOOL = ['handlers', 'judges', 'checks', 'costs', 'validations', 'outputValidations', 'prunes']

class Registry {
  handlers = new Map()
  /** `rollbackWhen` functions, by tool name: they judge a handler's value in JS, the engine counts the flags. */
  judges = new Map()
  /** `check` functions, by tool name: business checks of the arguments, run before permission. */
  checks = new Map()
  /** `cost` functions, by tool name: what a call costs against cost budgets, from its arguments. */
  costs = new Map()
  /** The schemas' own validations that run in JS, by tool name: `parameters` (after the engine's validation; the
   * handler receives its output) and `outputSchema` (on what the handler returns). */
  validations = new Map()
  outputValidations = new Map()
  /** For zod tools whose own validation is skipped: drops the keys zod would strip, by tool name. */
  prunes = new Map()

  /**
   * A spec read: the JSON the engine registers, and the functions kept here once it has. Throws a TypeError that
   * says what to fix when the spec cannot work. `command`: for a command tool, what the engine keeps of its
   * process's limits.
   */
  read(spec, command) {
    if (spec === null || typeof spec !== 'object') throw new TypeError('register(spec): spec must be an object')
    if (typeof spec.handler !== 'function') {
      throw new TypeError(`register(spec): tool "${spec.name}" needs a handler function (args, ctx) => result`)
    }
    const { handler, ...rest } = spec
    const judge = typeof rest.rollbackWhen === 'function' ? rest.rollbackWhen : undefined
    if (judge) rest.rollbackWhen = { host: true }
    const check = rest.check
    if (check !== undefined && typeof check !== 'function') throw new TypeError(`tool "${spec.name}": check must be a function (args, ctx) => problem | undefined`)
    if (check) rest.check = true
    const cost = typeof rest.cost === 'function' ? rest.cost : undefined
    if (rest.cost !== undefined && !cost && !(Number.isFinite(rest.cost) && rest.cost >= 0)) {
      throw new TypeError(`tool "${spec.name}": cost must be a number of at least 0, or a function (args, ctx) => number`)
    }
    if (cost) rest.cost = 'host'
    const fields = offAsOptions(pick(rest, SPEC_FIELDS, `tool "${spec.name}"`))
    const parameters = toolSchema(fields.parameters, 'parameters', spec.name)
    const output = toolSchema(fields.outputSchema, 'outputSchema', spec.name)
    if (parameters) fields.parameters = parameters.json
    if (output) fields.outputSchema = output.json
    if (parameters?.validate) Object.assign(fields, { schemaCheck: true, validationSchema: parameters.lenient })
    if (output?.validate) fields.outputCheck = true
    if (command) fields.command = command
    const json = JSON.stringify(fields, finiteNumbers(`tool "${spec.name}"`, ['parameters', 'outputSchema', 'validationSchema']))
    const kept = { handlers: handler, judges: judge, checks: check, costs: cost, validations: parameters?.validate, outputValidations: output?.validate, prunes: parameters?.prune }
    return { json, kept }
  }

  /** Keeps what `read` found of a tool the engine registered (by the map it goes in), in place of what an earlier
   * one of that name left. */
  keep(name, kept) {
    for (const map of PER_TOOL) {
      if (kept[map]) this[map].set(name, kept[map])
      else this[map].delete(name)
    }
  }

  remove(name) {
    this.keep(name, {})
  }

  /** The arguments with the keys a zod schema strips dropped, for a tool whose zod validation is skipped. */
  pruned(name, args) {
    const prune = this.prunes.get(name)
    return prune === undefined ? args : prune(args)
  }

  /** What the handler receives: the arguments, or the output of the schema's own validation of them (kept from
   * admission for the first attempt; a retry validates its fresh copy again). */
  inputOf(turn, index, name, args, attempt) {
    const validate = this.validations.get(name)
    if (validate === undefined) return this.pruned(name, args)
    if (attempt === 1 && turn.parsed?.has(index)) {
      const value = turn.parsed.get(index)
      turn.parsed.delete(index)
      return value
    }
    const verdict = validate(args)
    const passed = (result) => {
      const { issues, value } = validationResult(result)
      if (issues) throw new Error(`its arguments no longer pass the schema's own validation: ${issues.map(([at, message]) => `${at || '(arguments)'}: ${message}`).join('; ')}`)
      return value
    }
    return typeof verdict?.then === 'function' ? Promise.resolve(verdict).then(passed) : passed(verdict)
  }
}

/** `read_artifact` and `search_artifact`, with which a model pages through an output that was too long to show and
 * was saved to an artifact: they read only `engine`'s artifacts. */
function artifactTools(engine) {
  const path = { type: 'string', description: 'The artifact path given in the truncated result.' }
  return [
    {
      name: 'read_artifact',
      description: 'Read part of a tool output that was too long to show in full and was saved to an artifact file. ' +
        'Offset and limit count characters; the answer says where to read on.',
      parameters: {
        type: 'object',
        properties: {
          path,
          offset: { type: 'integer', minimum: 0, description: 'The first character to read (0 = the start).' },
          limit: { type: 'integer', minimum: 1, maximum: ARTIFACT_PAGE_CHARS, description: 'How many characters to read (default 10000).' },
        },
        required: ['path'],
        additionalProperties: false,
      },
      readOnly: true,
      maxOutputChars: ARTIFACT_PAGE_CHARS + 1_000,
      handler: ({ path, offset = 0, limit }, { context }) => engine.readArtifact(path, offset, limit, policyJson(context)),
    },
    {
      name: 'search_artifact',
      description: 'Find where a pattern (a regular expression, or plain text) occurs in a saved tool output: ' +
        'line, character offset and the text around each match, for reading on with read_artifact.',
      parameters: {
        type: 'object',
        properties: { path, pattern: { type: 'string', minLength: 1, description: 'A regular expression or plain text.' } },
        required: ['path', 'pattern'],
        additionalProperties: false,
      },
      readOnly: true,
      handler: ({ path, pattern }, { context }) => engine.searchArtifact(path, pattern, policyJson(context)),
    },
  ]
}

/** The engine's job calls, for the job tools of command tools that run in the background. */
function jobCalls(engine) {
  return {
    status: (id) => engine.jobStatus(id),
    output: (id, stream, offset, limit) => engine.jobOutput(id, stream, offset, limit),
    kill: (id) => engine.killJob(id),
    ended: (id, signal) => lookUntil(() => signal.aborted || JSON.parse(engine.jobStatus(id)).state !== 'running'),
  }
}

module.exports = { Registry, artifactTools, jobCalls }
