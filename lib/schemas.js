'use strict'
// Tool schemas as the programmer declares them: a JSON Schema, or a Standard Schema (zod, valibot, ArkType) turned
// into JSON Schema once, at registration. The engine validates and repairs against that JSON Schema; the schema's
// own `validate` runs after it only when the schema says more than JSON Schema can (refinements, transforms,
// defaults), and then the handler receives its output.

/** The dialect asked of a Standard JSON Schema first (MCP's default, the engine's default), then the fallback. */
const TARGETS = ['draft-2020-12', 'draft-07']
const DEFAULT_DIALECT = 'https://json-schema.org/draft/2020-12/schema'

/**
 * `{ json, validate }` for a tool's `parameters` or `outputSchema`; undefined when none was given. `json` is the
 * JSON Schema the engine compiles; `validate` (value → `{ value } | { issues }`, or a Promise of one) is set when
 * the schema's own validation must run in JS as well. Throws a TypeError that says what to pass instead when the
 * value is no schema of a kind accepted here.
 */
function toolSchema(schema, field, tool) {
  if (schema === undefined) return undefined
  const what = `tool "${tool}": ${field}`
  const standard = standardOf(schema)
  if (standard !== undefined) return fromStandard(schema, standard, what)
  if (isPlainObject(schema)) return { json: schema, validate: undefined }
  throw new TypeError(`${what} must be a JSON Schema (a plain object such as { type: 'object', properties: {…} }) or a ` +
    `Standard Schema (zod 4, valibot, ArkType); got ${kindOf(schema)}`)
}

/** A value's `~standard` property when it is a Standard Schema (zod and valibot schemas are objects, ArkType's are
 * functions). */
function standardOf(value) {
  if ((typeof value !== 'object' && typeof value !== 'function') || value === null) return undefined
  const standard = value['~standard']
  return standard !== null && typeof standard === 'object' && standard.version === 1 ? standard : undefined
}

function fromStandard(schema, standard, what) {
  const vendor = typeof standard.vendor === 'string' ? standard.vendor : 'an unnamed library'
  const json = jsonSchemaOf(schema, standard, vendor, what)
  if (!isPlainObject(json)) throw new TypeError(`${what}: the ${vendor} schema's JSON Schema is not an object (${kindOf(json)})`)
  if (typeof standard.validate !== 'function') return { json, validate: undefined }
  // zod says what its schema holds: one that JSON Schema expresses whole needs no second pass. Other libraries'
  // schemas always validate again, since nothing tells whether they refine or transform.
  const needsPass = vendor === 'zod' && schema._zod !== undefined ? zodSaysMore(schema) : true
  return { json, validate: needsPass ? (value) => standard.validate(value) : undefined }
}

/** Options a library's converter takes to leave out what JSON Schema cannot say, for schemas whose own validation
 * runs anyway: valibot's refuses a `check()` unless told to ignore it. */
const LENIENT = { valibot: { errorMode: 'ignore' } }

function jsonSchemaOf(schema, standard, vendor, what) {
  const convert = standard.jsonSchema?.input
  if (typeof convert === 'function') {
    const lenient = typeof standard.validate === 'function' && Object.hasOwn(LENIENT, vendor) ? [LENIENT[vendor]] : []
    let failure
    for (const libraryOptions of [undefined, ...lenient]) {
      for (const target of TARGETS) {
        try {
          return withoutDefaultDialect(convert.call(standard.jsonSchema, libraryOptions ? { target, libraryOptions } : { target }))
        } catch (err) {
          failure ??= err
        }
      }
    }
    throw new TypeError(`${what}: the ${vendor} schema cannot be turned into JSON Schema: ${messageOf(failure)}`)
  }
  if (vendor === 'zod' && schema._zod !== undefined) return withoutDefaultDialect(zodToJsonSchema(schema, what))
  if (vendor === 'zod') {
    throw new TypeError(`${what}: a zod 3 schema carries no JSON Schema: use zod 4 (in zod 3.25, import { z } from 'zod/v4'), or pass a JSON Schema`)
  }
  const adapter = vendor === 'valibot' ? ' (valibot: wrap it in toStandardJsonSchema() from @valibot/to-json-schema)' : ''
  throw new TypeError(`${what}: this ${vendor} schema offers no JSON Schema (~standard.jsonSchema)${adapter}; ` +
    'the engine validates against JSON Schema, so pass a schema that offers one, or a JSON Schema')
}

/** zod 4 before 4.2 has no `~standard.jsonSchema`: its own `toJSONSchema` converts it, from the app's zod. */
function zodToJsonSchema(schema, what) {
  let toJSONSchema
  try {
    ;({ toJSONSchema } = require('zod/v4/core'))
  } catch {
    throw new TypeError(`${what}: this zod schema carries no JSON Schema (zod < 4.2) and zod itself could not be loaded: upgrade zod to 4.2 or later`)
  }
  try {
    return toJSONSchema(schema, { io: 'input', target: 'draft-2020-12' })
  } catch (err) {
    throw new TypeError(`${what}: the zod schema cannot be turned into JSON Schema: ${messageOf(err)}`)
  }
}

/** The engine reads 2020-12 when a schema names no dialect; another dialect is kept, since it changes meanings. */
function withoutDefaultDialect(json) {
  if (!isPlainObject(json) || json.$schema !== DEFAULT_DIALECT) return json
  const { $schema, ...rest } = json
  return rest
}

/** zod checks that the JSON Schema it produces enforces as zod does. The rest (refine, formats, regexes, which the
 * engine's regex dialect may read differently, trims and other overwrites) need zod's own pass. */
const ZOD_PLAIN_CHECKS = new Set(['less_than', 'greater_than', 'multiple_of', 'number_format', 'max_length', 'min_length', 'length_equals'])
/** zod types whose JSON Schema says all they check, each with where its inner schemas are. */
const ZOD_PLAIN_TYPES = {
  string: [], number: [], int: [], boolean: [], null: [], any: [], unknown: [], never: [], enum: [], literal: [],
  object: ['shape', 'catchall'], array: ['element'], tuple: ['items', 'rest'], union: ['options'],
  intersection: ['left', 'right'], record: ['keyType', 'valueType'], optional: ['innerType'], nullable: ['innerType'],
  readonly: ['innerType'], nonoptional: ['innerType'],
}

/** Whether a zod 4 schema checks, changes or fills in anything its JSON Schema does not say: refinements,
 * transforms, defaults, coercion, types JSON cannot hold. Cycles (z.lazy) count as saying more. */
function zodSaysMore(schema, seen = new Set()) {
  if (seen.has(schema)) return true
  seen.add(schema)
  const def = schema?._zod?.def
  const inner = def && Object.hasOwn(ZOD_PLAIN_TYPES, def.type) ? ZOD_PLAIN_TYPES[def.type] : undefined
  // A string format (email, url, uuid…) is an annotation to the engine, and zod's own regex dialect is JS's.
  if (inner === undefined || def.coerce || def.format !== undefined) return true
  if (def.checks?.some((check) => !ZOD_PLAIN_CHECKS.has(check?._zod?.def?.check))) return true
  for (const key of inner) {
    const value = def[key]
    if (value === undefined) continue
    const schemas = Array.isArray(value) ? value : def.type === 'object' && key === 'shape' ? Object.values(value) : [value]
    if (schemas.some((s) => zodSaysMore(s, seen))) return true
  }
  return false
}

/** A Standard Schema `validate` result: `{ issues }` as the engine takes them, or `{ value }`. Anything else is the
 * library's bug, reported as such. */
function validationResult(result) {
  if (result !== null && typeof result === 'object') {
    if (result.issues != null) return { issues: issuesOf(result.issues), value: undefined }
    if ('value' in result) return { issues: undefined, value: result.value }
  }
  throw new TypeError(`the schema's validate returned neither { value } nor { issues } (got ${result === null ? 'null' : typeof result})`)
}

/** A Standard Schema result's issues as the engine takes them: `[JSON pointer, message]` pairs. */
function issuesOf(issues) {
  return Array.from(issues, (issue) => [pointerOf(issue?.path), typeof issue?.message === 'string' ? issue.message : String(issue?.message)])
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
