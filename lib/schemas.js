'use strict'
// Tool schemas as the programmer declares them: a JSON Schema, or a Standard Schema (zod, valibot, ArkType) turned
// into JSON Schema once, at registration. The engine validates and repairs against that JSON Schema; the schema's
// own `validate` runs after it only when the schema says more than JSON Schema can (refinements, transforms,
// defaults), and then the handler receives its output.

/** The dialect asked of a Standard JSON Schema first (MCP's default, the engine's default), then the fallback. */
const TARGETS = ['draft-2020-12', 'draft-07']
const DEFAULT_DIALECT = 'https://json-schema.org/draft/2020-12/schema'
/** The most issues of one validation passed on: the model reads a dozen, and a million would stall the loop. */
const MAX_ISSUES = 1_000

/**
 * What a tool's `parameters` or `outputSchema` holds, undefined when none was given:
 * - `json`, the JSON Schema the model is shown;
 * - `lenient`, set when the schema's own validation runs too: the JSON Schema the engine validates with, which
 *   leaves to it what the engine might judge differently (patterns, whose flags JSON Schema drops; zod's `catch`
 *   and coercion);
 * - `validate` (value → `{ value } | { issues }`, or a Promise of one), set when that validation must run in JS;
 * - `prune`, for a zod schema whose validation is skipped: drops the keys zod would strip, in place.
 * Throws a TypeError that says what to pass instead when the value is no schema of a kind accepted here.
 */
function toolSchema(schema, field, tool) {
  if (schema === undefined) return undefined
  const what = `tool "${tool}": ${field}`
  try {
    return converted(schema, field, what)
  } catch (err) {
    // Walking a schema that contains itself, or one nested thousands deep, runs out of stack.
    if (err instanceof RangeError) throw new TypeError(`${what}: the schema contains itself or is nested too deeply to read (${err.message})`)
    throw err
  }
}

function converted(schema, field, what) {
  const standard = standardOf(schema)
  if (standard !== undefined) return fromStandard(schema, standard, what, field === 'outputSchema')
  if (!isPlainObject(schema)) {
    throw new TypeError(`${what} must be a JSON Schema (a plain object such as { type: 'object', properties: {…} }) or a ` +
      `Standard Schema (zod 4, valibot, ArkType); got ${kindOf(schema)}`)
  }
  const nested = standardInside(schema, '')
  if (nested !== undefined) {
    throw new TypeError(`${what}: a ${nested.vendor} schema at ${nested.at || 'its root'} inside a JSON Schema cannot be sent to a model: ` +
      'declare the whole object with the library (z.object({ … })), or write that part as JSON Schema too')
  }
  return { json: schema, lenient: undefined, validate: undefined, prune: undefined }
}

/** A value's `~standard` property when it is a Standard Schema (zod and valibot schemas are objects, ArkType's are
 * functions). */
function standardOf(value) {
  if ((typeof value !== 'object' && typeof value !== 'function') || value === null) return undefined
  const standard = value['~standard']
  return standard !== null && typeof standard === 'object' && standard.version === 1 ? standard : undefined
}

/** The first Standard Schema found among a plain JSON Schema's values, with where; a schema's size bounds the walk. */
function standardInside(value, at) {
  if (value === null || (typeof value !== 'object' && typeof value !== 'function')) return undefined
  const standard = standardOf(value)
  if (standard !== undefined) return { vendor: standard.vendor, at }
  if (!isPlainObject(value) && !Array.isArray(value)) return undefined
  for (const [key, inner] of Object.entries(value)) {
    const found = standardInside(inner, `${at}/${key}`)
    if (found) return found
  }
  return undefined
}

function fromStandard(schema, standard, what, isOutput) {
  const vendor = typeof standard.vendor === 'string' ? standard.vendor : 'an unnamed library'
  const isZod4 = vendor === 'zod' && schema._zod !== undefined
  const json = jsonSchemaOf(schema, standard, vendor, what)
  if (typeof standard.validate !== 'function') return { json, lenient: undefined, validate: undefined, prune: undefined }
  // zod says what its schema holds: one that JSON Schema expresses whole needs no second pass, only zod's stripping
  // of unknown keys. Other libraries' schemas always validate again: nothing tells whether they refine or transform.
  // An optional output is one the handler may return nothing for, which JSON (null) cannot say: zod judges it.
  const optionalOutput = isOutput && schema._zod?.def?.type === 'optional'
  const prune = isZod4 && !optionalOutput ? zodPrune(schema) : undefined
  if (prune !== undefined) return { json, lenient: undefined, validate: undefined, prune: prune === KEEP ? undefined : prune }
  const lenient = leniently(isZod4 ? jsonSchemaOf(schema, standard, vendor, what, { override: zodLeftToZod }) : json)
  return { json, lenient, validate: validatorOf(schema, standard), prune: undefined }
}

/** zod's own async parse where there is one: its Standard Schema `validate` runs refinements twice when one turns
 * out to be async, and leaves a rejecting one unhandled. */
function validatorOf(schema, standard) {
  if (typeof schema.safeParseAsync !== 'function') return (value) => standard.validate(value)
  return (value) => schema.safeParseAsync(value).then((r) => (r.success ? { value: r.data } : { issues: r.error.issues }))
}

/** Options a library's converter takes to leave out what JSON Schema cannot say, for schemas whose own validation
 * runs anyway: valibot's refuses a `check()` unless told to ignore it. */
const LENIENT = { valibot: { errorMode: 'ignore' } }

function jsonSchemaOf(schema, standard, vendor, what, zodOptions) {
  const convert = standard.jsonSchema?.input
  if (typeof convert === 'function') {
    const lenient = typeof standard.validate === 'function' && Object.hasOwn(LENIENT, vendor) ? [LENIENT[vendor]] : []
    let failure
    for (const libraryOptions of zodOptions ? [zodOptions] : [undefined, ...lenient]) {
      for (const target of TARGETS) {
        let json
        try {
          json = convert.call(standard.jsonSchema, libraryOptions ? { target, libraryOptions } : { target })
        } catch (err) {
          failure ??= err
          continue
        }
        return tidied(json, vendor, what)
      }
    }
    throw new TypeError(`${what}: the ${vendor} schema cannot be turned into JSON Schema: ${messageOf(failure)}`)
  }
  if (vendor === 'zod' && schema._zod !== undefined) return tidied(zodToJsonSchema(schema, what, zodOptions), vendor, what)
  if (vendor === 'zod') {
    throw new TypeError(`${what}: a zod 3 schema carries no JSON Schema: use zod 4 (in zod 3.25, import { z } from 'zod/v4'), or pass a JSON Schema`)
  }
  const adapter = vendor === 'valibot' ? ' (valibot: wrap it in toStandardJsonSchema() from @valibot/to-json-schema)' : ''
  throw new TypeError(`${what}: this ${vendor} schema offers no JSON Schema (~standard.jsonSchema)${adapter}; ` +
    'the engine validates against JSON Schema, so pass a schema that offers one, or a JSON Schema')
}

/** zod before 4.2, and zod/mini, have no `~standard.jsonSchema`: zod's own `toJSONSchema` converts them, from the
 * zod this package resolves, else the application's. */
function zodToJsonSchema(schema, what, options) {
  let toJSONSchema
  for (const from of [undefined, { paths: [process.cwd()] }]) {
    try {
      ;({ toJSONSchema } = require(from ? require.resolve('zod/v4/core', from) : 'zod/v4/core'))
      break
    } catch {
      // Not found from here: the next place.
    }
  }
  if (toJSONSchema === undefined) {
    throw new TypeError(`${what}: this zod schema carries no JSON Schema of its own (zod before 4.2, or zod/mini), and zod ` +
      'could not be loaded to convert it: install zod (4.x) as a dependency of the application')
  }
  try {
    return toJSONSchema(schema, { ...options, io: 'input', target: 'draft-2020-12' })
  } catch (err) {
    throw new TypeError(`${what}: the zod schema cannot be turned into JSON Schema: ${messageOf(err)}`)
  }
}

/** The JSON Schema without the default dialect named (a draft-07 `$schema` is kept: it changes meanings), and with a
 * root that is only a `$ref` into its own `$defs` (zod's `.meta({ id })`) written out, as providers want an object
 * schema at the root. */
function tidied(json, vendor, what) {
  if (!isPlainObject(json)) throw new TypeError(`${what}: the ${vendor} schema's JSON Schema is not an object (${kindOf(json)})`)
  let out = json
  if (out.$schema === DEFAULT_DIALECT) {
    const { $schema, ...rest } = out
    out = rest
  }
  const ref = typeof out.$ref === 'string' && /^#\/\$defs\/([^/]+)$/.exec(out.$ref)
  const target = ref && isPlainObject(out.$defs) ? out.$defs[ref[1].replaceAll('~1', '/').replaceAll('~0', '~')] : undefined
  if (isPlainObject(target) && Object.keys(out).every((k) => k === '$ref' || k === '$defs' || k === '$schema')) {
    const { $ref, ...rest } = out
    out = { ...target, ...rest }
  }
  return out
}

/** Marks, in zod's conversion for the engine, a subschema left to zod whole: its property is not required either. */
const LEFT_TO_ZOD = 'x-toolgate-left-to-zod'

/** In zod's conversion for the engine: a `catch`, a coercion, a preprocess (converted as its output) and a loose
 * record (whose keys of the wrong kind pass unchecked) accept what their JSON Schema does not say, so the engine
 * takes anything there, and a missing value too. */
function zodLeftToZod({ zodSchema, jsonSchema }) {
  const def = zodSchema?._zod?.def
  const preprocess = def?.type === 'pipe' && def.in?._zod?.def?.type === 'transform'
  const looseRecord = def?.type === 'record' && def.mode === 'loose'
  if (def?.type !== 'catch' && !def?.coerce && !preprocess && !looseRecord) return
  for (const key of Object.keys(jsonSchema)) delete jsonSchema[key]
  jsonSchema[LEFT_TO_ZOD] = true
}

/** Subschema-valued keywords: one subschema, a list of them, or a map of them. */
const ONE = new Set(['additionalProperties', 'additionalItems', 'contains', 'then', 'else', 'contentSchema'])
const LIST = new Set(['allOf', 'anyOf', 'prefixItems'])
const MAP = new Set(['properties', '$defs', 'definitions', 'dependentSchemas'])
/** Keywords a looser subschema could make stricter (one more `oneOf` branch matching, a `not` or an `if` matching
 * more, fewer properties evaluated), or that hold patterns: left out, so that every change only widens. */
const LEFT_OUT = new Set(['pattern', 'patternProperties', 'propertyNames', 'not', 'if', 'unevaluatedProperties', 'unevaluatedItems', LEFT_TO_ZOD])

/**
 * The schema the engine validates with when the schema's own validation runs too: what that validation judges
 * better is left to it. Every `pattern` (JSON Schema drops a regex's flags, and the engine reads another dialect)
 * and what depends on patterns go, `oneOf` becomes `anyOf`, and each change only ever lets more through. Only
 * subschemas are walked: a `const` or `default` holding a `pattern` key is data.
 */
function leniently(schema) {
  if (!isPlainObject(schema)) return schema
  const out = {}
  const keyed = schema.patternProperties !== undefined
  for (const [key, value] of Object.entries(schema)) {
    if (LEFT_OUT.has(key) || (keyed && key === 'additionalProperties')) continue
    if (key === 'oneOf' && Array.isArray(value)) out.anyOf = [...(out.anyOf ?? []), ...value.map(leniently)]
    else if (ONE.has(key)) out[key] = leniently(value)
    else if (LIST.has(key) && Array.isArray(value)) out[key] = [...(out[key] ?? []), ...value.map(leniently)]
    else if (key === 'items') out[key] = Array.isArray(value) ? value.map(leniently) : leniently(value)
    else if (MAP.has(key) && isPlainObject(value)) out[key] = Object.fromEntries(Object.entries(value).map(([k, v]) => [k, leniently(v)]))
    else if (key === 'dependencies' && isPlainObject(value)) out[key] = Object.fromEntries(Object.entries(value).map(([k, v]) => [k, Array.isArray(v) ? v : leniently(v)]))
    else out[key] = value
  }
  if (Array.isArray(out.required) && isPlainObject(schema.properties)) {
    out.required = out.required.filter((name) => schema.properties[name]?.[LEFT_TO_ZOD] !== true)
  }
  return out
}

/** zod checks that the JSON Schema it produces enforces as zod does. The rest (refine, formats, regexes, trims and
 * other overwrites) need zod's own pass. */
const ZOD_PLAIN_CHECKS = new Set(['less_than', 'greater_than', 'multiple_of', 'number_format', 'max_length', 'min_length', 'length_equals'])
const ZOD_LEAVES = new Set(['string', 'number', 'int', 'boolean', 'null', 'any', 'unknown', 'never', 'enum', 'literal'])
/** Returned by `zodPrune` for a schema whose output is its input as is. */
const KEEP = Symbol('keep')

/**
 * For a zod 4 schema whose JSON Schema says all it checks: KEEP when zod's output is its input, or a function that
 * makes the input into the output by dropping the keys zod strips (of objects in its default mode, at any depth).
 * Undefined when zod's own pass must run: refinements, transforms, defaults, coercion, formats, types JSON cannot
 * hold, `readonly` (zod freezes), recursion, and unions of objects that strip (which branch strips is zod's call).
 */
function zodPrune(schema, onPath = new Set()) {
  if (onPath.has(schema)) return undefined
  const def = schema?._zod?.def
  if (!def || def.coerce || (def.type === 'string' && def.format !== undefined)) return undefined
  if (def.checks?.some((check) => !ZOD_PLAIN_CHECKS.has(check?._zod?.def?.check))) return undefined
  if (ZOD_LEAVES.has(def.type)) return KEEP
  onPath.add(schema)
  try {
    return zodPruneOf(def, onPath)
  } finally {
    onPath.delete(schema)
  }
}

function zodPruneOf(def, onPath) {
  const inner = (s) => zodPrune(s, onPath)
  switch (def.type) {
    case 'optional':
    case 'nullable':
    case 'nonoptional': {
      const prune = inner(def.innerType)
      return prune === undefined || prune === KEEP ? prune : (value) => (value == null ? value : prune(value))
    }
    case 'array': {
      const prune = inner(def.element)
      if (prune === undefined || prune === KEEP) return prune
      return (value) => {
        if (Array.isArray(value)) for (let i = 0; i < value.length; i++) value[i] = prune(value[i])
        return value
      }
    }
    case 'tuple': {
      const items = def.items.map(inner)
      const rest = def.rest == null ? KEEP : inner(def.rest)
      if (rest === undefined || items.includes(undefined)) return undefined
      if (rest === KEEP && items.every((p) => p === KEEP)) return KEEP
      return (value) => {
        if (!Array.isArray(value)) return value
        for (let i = 0; i < value.length; i++) {
          const prune = i < items.length ? items[i] : rest
          if (prune !== KEEP) value[i] = prune(value[i])
        }
        return value
      }
    }
    case 'union': {
      const options = def.options.map(inner)
      return options.every((p) => p === KEEP) ? KEEP : undefined
    }
    case 'intersection':
      return inner(def.left) === KEEP && inner(def.right) === KEEP ? KEEP : undefined
    case 'record': {
      // A loose record passes keys its key type refuses through unchecked: zod's call.
      if (def.mode === 'loose' || inner(def.keyType) === undefined) return undefined
      const prune = inner(def.valueType)
      return prune === undefined || prune === KEEP ? prune : (value) => eachValue(value, prune)
    }
    case 'object':
      return objectPrune(def, inner)
    default:
      return undefined
  }
}

function objectPrune(def, inner) {
  const shape = def.shape
  const props = Object.entries(shape).map(([key, s]) => [key, inner(s)])
  if (props.some(([, p]) => p === undefined)) return undefined
  const catchall = def.catchall === undefined ? undefined : inner(def.catchall)
  if (def.catchall !== undefined && catchall === undefined) return undefined
  const nested = props.filter(([, p]) => p !== KEEP)
  // No catchall: zod strips the keys it does not name. A catchall (z.looseObject, z.strictObject) keeps or refuses them.
  const strips = def.catchall === undefined
  if (!strips && nested.length === 0 && catchall === KEEP) return KEEP
  return (value) => {
    if (value === null || typeof value !== 'object' || Array.isArray(value)) return value
    for (const key of Object.keys(value)) {
      if (Object.hasOwn(shape, key)) continue
      if (strips) delete value[key]
      else if (catchall !== KEEP) value[key] = catchall(value[key])
    }
    for (const [key, prune] of nested) if (Object.hasOwn(value, key)) value[key] = prune(value[key])
    return value
  }
}

function eachValue(value, prune) {
  if (value !== null && typeof value === 'object' && !Array.isArray(value)) for (const key of Object.keys(value)) value[key] = prune(value[key])
  return value
}

/** A Standard Schema `validate` result: `{ issues }` as the engine takes them, or `{ value }`. Anything else is the
 * library's bug, reported as such. */
function validationResult(result) {
  if (result !== null && typeof result === 'object') {
    // Issues present, even none listed, mean the value failed (Standard Schema's rule).
    if (result.issues != null) return { issues: issuesOf(result.issues), value: undefined }
    if ('value' in result) return { issues: undefined, value: result.value }
  }
  throw new TypeError(`the schema's validate returned neither { value } nor { issues } (got ${result === null ? 'null' : typeof result})`)
}

/** A Standard Schema result's issues as the engine takes them: `[JSON pointer, message]` pairs, at least one. */
function issuesOf(issues) {
  if (typeof issues === 'string' || typeof issues?.[Symbol.iterator] !== 'function') throw new TypeError(`the schema's validate returned issues that are not a list (${kindOf(issues)})`)
  const out = []
  for (const issue of issues) {
    if (out.length === MAX_ISSUES) break
    out.push([pointerOf(issue?.path), typeof issue?.message === 'string' ? issue.message : String(issue?.message)])
  }
  return out.length > 0 ? out : [['', 'the schema refused the value without saying why']]
}

function pointerOf(path) {
  if (path == null) return ''
  let pointer = ''
  for (const segment of path) {
    const key = segment !== null && typeof segment === 'object' ? segment.key : segment
    pointer += `/${String(key).replaceAll('~', '~0').replaceAll('/', '~1')}`
  }
  return pointer
}

function isPlainObject(value) {
  if (value === null || typeof value !== 'object') return false
  const proto = Object.getPrototypeOf(value)
  return proto === Object.prototype || proto === null
}

function kindOf(value) {
  if (value === null) return 'null'
  if (Array.isArray(value)) return 'an array'
  if (typeof value === 'object') return `an instance of ${value.constructor?.name ?? 'an unnamed class'}`
  return `a ${typeof value}`
}

function messageOf(err) {
  return err instanceof Error ? err.message : String(err)
}

module.exports = { toolSchema, validationResult }
