// Compiled with the other type tests (`tsc -p __test__/types`): what `register` and `defineTool` infer from a
// tool's schemas. Types are compared exactly (`Equal`), not by assignability, and `@ts-expect-error` lines must
// stay errors, so a type that drifts wider or narrower fails here.

import type Anthropic from '@anthropic-ai/sdk'
import type * as Spec from '@standard-schema/spec'
import { type } from 'arktype'
import * as v from 'valibot'
import { toStandardJsonSchema } from '@valibot/to-json-schema'
import { z } from 'zod'
import * as zm from 'zod/mini'
import { ToolExecutor, defineTool } from '../..'
import type {
  ExecutionContext,
  FromSchema,
  InferInput,
  InferOutput,
  JsonSchema,
  ObjectJsonSchema,
  StandardJSONSchemaV1,
  StandardSchemaV1,
  ToolArgs,
  ToolContext,
  ToolReturn,
} from '../..'

type Equal<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false

const gate = new ToolExecutor()

// JSON Schema literals: inline in `register` they need no `as const`.
gate.register({
  name: 'get_weather',
  parameters: {
    type: 'object',
    properties: { city: { type: 'string' }, days: { type: 'integer', minimum: 1 }, units: { enum: ['metric', 'imperial'] } },
    required: ['city'],
    additionalProperties: false,
  },
  handler: (args) => {
    true satisfies Equal<typeof args, { city: string; days?: number; units?: 'metric' | 'imperial' }>
    // @ts-expect-error the schema declares no such property
    void args.town
    return args.city
  },
  check: (args) => {
    true satisfies Equal<typeof args, { city: string; days?: number; units?: 'metric' | 'imperial' }>
    return args.city === '' ? 'city is empty' : undefined
  },
})
// An annotation the schema does not back is refused.
gate.register({
  name: 'get_weather_2',
  parameters: { type: 'object', properties: { city: { type: 'string' } } },
  // @ts-expect-error `city` is optional in the schema
  handler: (args: { city: string }) => args.city,
})
gate.register({
  name: 'get_weather_3',
  parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
  handler: ({ city }: { city: string }) => city,
})

// Each keyword FromSchema reads, on schemas declared apart `as const`.
const nested = {
  type: 'object',
  properties: {
    id: { const: 7 },
    tags: { type: 'array', items: { type: 'string' } },
    point: { type: 'array', prefixItems: [{ type: 'number' }, { type: 'number' }], minItems: 2, items: false },
    labelled: { type: 'array', prefixItems: [{ type: 'string' }, { type: 'boolean' }], minItems: 1 },
    draft07: { type: 'array', items: [{ type: 'string' }], additionalItems: { type: 'integer' } },
    owner: {
      type: 'object',
      properties: { name: { type: 'string' }, email: { type: ['string', 'null'], format: 'email' } },
      required: ['name', 'email'],
    },
    extra: { type: 'object', properties: { a: { type: 'string' } }, additionalProperties: true },
    counts: { type: 'object', additionalProperties: { type: 'number' } },
    scored: { type: 'object', properties: { a: { type: 'string' } }, additionalProperties: { type: 'number' } },
    empty: { type: 'object', additionalProperties: false },
    anything: { type: 'object' },
    scalar: { type: ['string', 'number', 'boolean'] },
    maybe: { type: ['object', 'null'], properties: { a: { type: 'string' } }, required: ['a'] },
    either: { anyOf: [{ type: 'string' }, { type: 'object', properties: { n: { type: 'number' } }, required: ['n'] }] },
    shape: {
      oneOf: [
        { type: 'object', properties: { kind: { const: 'circle' }, r: { type: 'number' } }, required: ['kind', 'r'] },
        { type: 'object', properties: { kind: { const: 'square' }, side: { type: 'number' } }, required: ['kind', 'side'] },
      ],
    },
    both: { allOf: [{ type: 'object', properties: { a: { type: 'string' } }, required: ['a'] }, { type: 'object', properties: { b: { type: 'number' } } }] },
    nullish: { enum: ['a', 'b', null] },
    loose: true,
    referenced: { $ref: '#/$defs/thing' },
    declaredOnlyRequired: { type: 'object', required: ['x'] },
  },
  required: ['id', 'owner'],
  $defs: { thing: { type: 'string' } },
  'x-vendor': { anything: 1 },
  $schema: 'https://json-schema.org/draft/2020-12/schema',
} as const satisfies JsonSchema
type Nested = {
  id: 7
  owner: { name: string; email: string | null }
  tags?: string[]
  point?: [number, number]
  labelled?: [string, boolean?, ...unknown[]]
  draft07?: [string?, ...number[]]
  extra?: { [key: string]: unknown; a?: string }
  counts?: Record<string, number>
  scored?: { [key: string]: unknown; a?: string }
  empty?: Record<string, never>
  anything?: Record<string, unknown>
  scalar?: string | number | boolean
  maybe?: { a: string } | null
  either?: string | { n: number }
  shape?: { kind: 'circle'; r: number } | { kind: 'square'; side: number }
  both?: { a: string } & { b?: number }
  nullish?: 'a' | 'b' | null
  loose?: unknown
  referenced?: unknown
  declaredOnlyRequired?: { x: unknown }
}
true satisfies Equal<FromSchema<typeof nested>, Nested>
true satisfies Equal<ToolArgs<typeof nested>, Nested>
// @ts-expect-error the comparison is exact: a wider type is not the same
true satisfies Equal<FromSchema<typeof nested>, Nested & Record<string, unknown>>
true satisfies Equal<FromSchema<{ type: 'string' }>, string>
true satisfies Equal<FromSchema<false>, never>
gate.register({ name: 'nested', parameters: nested, handler: (args) => [args.owner.email, args.point?.[1]] })

// Deep nesting stays well inside the compiler's limits.
const deep = { type: 'object', properties: { a: { type: 'object', properties: { b: { type: 'object', properties: { c: { type: 'object', properties: { d: { type: 'object', properties: { e: { type: 'object', properties: { f: { type: 'object', properties: { g: { type: 'object', properties: { h: { type: 'object', properties: { i: { type: 'object', properties: { j: { type: 'array', items: { type: 'object', properties: { z: { type: 'string' } }, required: ['z'] } } } } } } } } } } } } } } } } } } } } } } as const
true satisfies Equal<ToolArgs<typeof deep>, { a?: { b?: { c?: { d?: { e?: { f?: { g?: { h?: { i?: { j?: { z: string }[] } } } } } } } } } }>

// The keywords are typed; vendor keywords are not; lists may be readonly.
// @ts-expect-error 'objekt' is not a JSON Schema type
gate.register({ name: 'bad_type', parameters: { type: 'objekt' }, handler: () => '' })
// @ts-expect-error `required` is a list
gate.register({ name: 'bad_required', parameters: { type: 'object', required: 'x' }, handler: () => '' })
// @ts-expect-error `nullable` is OpenAPI's: validation would ignore it
gate.register({ name: 'bad_nullable', parameters: { type: 'object', properties: { a: { type: 'string', nullable: true } } }, handler: () => '' })
// @ts-expect-error a property's schema is a schema
gate.register({ name: 'bad_property', parameters: { type: 'object', properties: { a: 'string' } }, handler: () => '' })
const readonlyLists: JsonSchema = { type: ['object', 'null'] as const, required: ['a'] as const, 'x-order': 3, $id: 'urn:x' }
void readonlyLists

// A schema typed only as JsonSchema, or none, gives Record<string, unknown>, never any.
declare const loaded: JsonSchema
declare const anySchema: any
gate.register({ name: 'loaded', parameters: loaded, handler: (args) => true satisfies Equal<typeof args, Record<string, unknown>> })
gate.register({ name: 'no_parameters', handler: (args) => true satisfies Equal<typeof args, Record<string, unknown>> })
gate.register({ name: 'any_schema', parameters: anySchema, handler: (args) => true satisfies Equal<typeof args, Record<string, unknown>> })
gate.register({ name: 'ref_only', parameters: { $ref: '#/$defs/x' }, handler: (args) => true satisfies Equal<typeof args, Record<string, unknown>> })
// ...unless the arguments' type is stated; the schemas are then not checked against it, nor the return.
gate.register<{ city: string }>({ name: 'stated', parameters: loaded, handler: (args) => true satisfies Equal<typeof args, { city: string }> })
gate.register<{ city: string }>({
  name: 'stated_zod',
  parameters: z.object({ city: z.string() }),
  outputSchema: z.object({ temp: z.number() }),
  handler: (args) => args.city,
})
// `satisfies` without `as const` keeps the type names but not `required`'s keys: every property is optional.
const satisfied = { type: 'object', properties: { a: { type: 'string' } }, required: ['a'] } satisfies JsonSchema
true satisfies Equal<ToolArgs<typeof satisfied>, { a?: string }>

// zod 4: the handler and `check` get the output (defaults filled, transforms applied).
const zodParameters = z.object({ city: z.string().min(1), days: z.number().int().default(3), at: z.string().transform((s) => new Date(s)) })
gate.register({
  name: 'zod_weather',
  parameters: zodParameters,
  check: (args) => true satisfies Equal<typeof args, { city: string; days: number; at: Date }>,
  handler: (args) => {
    true satisfies Equal<typeof args, { city: string; days: number; at: Date }>
    // @ts-expect-error the handler gets the output, not the input
    true satisfies Equal<typeof args, { city: string; days?: number | undefined; at: string }>
    return args.days
  },
})
// zod/mini's types have no `~standard.jsonSchema`; it is taken as a zod 4 schema.
gate.register({ name: 'zod_mini', parameters: zm.object({ q: zm.string() }), handler: (args) => true satisfies Equal<typeof args, { q: string }> })

// valibot: through toStandardJsonSchema; a bare valibot schema has no JSON Schema to give.
const valibotParameters = v.object({ query: v.string(), limit: v.optional(v.number(), 10) })
gate.register({
  name: 'valibot_search',
  parameters: toStandardJsonSchema(valibotParameters),
  handler: (args) => true satisfies Equal<typeof args, { query: string; limit: number }>,
})
// @ts-expect-error wrap it in toStandardJsonSchema
gate.register({ name: 'valibot_bare', parameters: valibotParameters, handler: () => '' })

// ArkType.
const arkParameters = type({ path: 'string', 'encoding?': "'utf8' | 'base64'", size: type('string').pipe((s) => Number(s)) })
gate.register({
  name: 'ark_read',
  parameters: arkParameters,
  handler: (args) => true satisfies Equal<typeof args, { path: string; encoding?: 'utf8' | 'base64'; size: number }>,
})

// The Standard Schema interfaces are the spec's, copied: each side takes the other's.
declare const specSchema: Spec.StandardSchemaV1<string, number> & Spec.StandardJSONSchemaV1<string, number>
declare const ownSchema: StandardSchemaV1<string, number> & StandardJSONSchemaV1<string, number>
const fromSpec: StandardSchemaV1<string, number> & StandardJSONSchemaV1<string, number> = specSchema
const toSpec: Spec.StandardSchemaV1<string, number> & Spec.StandardJSONSchemaV1<string, number> = ownSchema
true satisfies Equal<[InferInput<typeof specSchema>, InferOutput<typeof specSchema>], [string, number]>
void [fromSpec, toSpec]
// A Standard JSON Schema without `validate`: only the engine validates, so the handler gets the input type.
declare const jsonOnly: StandardJSONSchemaV1<{ n: string }, { n: number }>
gate.register({ name: 'json_only', parameters: jsonOnly, handler: (args) => true satisfies Equal<typeof args, { n: string }> })

// outputSchema: the handler returns what the schema takes in (a value or a Promise of one).
gate.register({
  name: 'out_json',
  outputSchema: { type: 'object', properties: { temp: { type: 'number' } }, required: ['temp'] },
  handler: async () => ({ temp: 21 }),
})
// A literal needs `as const` (or the handler a return type): TypeScript widens it, as the return's expected type
// is still being inferred when the handler is checked.
gate.register({
  name: 'out_json_sync',
  outputSchema: { type: 'array', items: { enum: ['ok', 'stale'] } },
  handler: () => ['ok' as const],
})
gate.register({
  name: 'out_json_bad',
  outputSchema: { type: 'object', properties: { temp: { type: 'number' } }, required: ['temp'] },
  // @ts-expect-error temp must be a number
  handler: async () => ({ temp: '21' }),
})
gate.register({
  name: 'out_zod',
  parameters: zodParameters,
  outputSchema: z.object({ at: z.string().transform((s) => new Date(s)) }),
  // The schema's input: it turns the string into a Date afterwards.
  handler: (args) => ({ at: args.at.toISOString() }),
})
gate.register({
  name: 'out_zod_bad',
  outputSchema: z.object({ at: z.string().transform((s) => new Date(s)) }),
  // @ts-expect-error the schema takes a string in
  handler: () => ({ at: new Date() }),
})
gate.register({
  name: 'out_ark_bad',
  outputSchema: type({ n: 'number' }),
  // @ts-expect-error nor a Promise of the wrong type
  handler: () => Promise.resolve({ n: 'one' }),
})
true satisfies Equal<ToolReturn<undefined>, unknown>
true satisfies Equal<ToolReturn<JsonSchema>, unknown>
gate.register({ name: 'out_none', handler: () => new Date() })

// defineTool keeps the inference; a tool typed for a context registers on an executor of that context.
interface AppContext extends ExecutionContext {
  userId: string
}
const whoami = defineTool({
  name: 'whoami',
  parameters: { type: 'object', properties: { verbose: { type: 'boolean' } } },
  outputSchema: z.object({ user: z.string() }),
  handler: (args, ctx: ToolContext<AppContext>) => {
    true satisfies Equal<typeof args, { verbose?: boolean }>
    return { user: ctx.context?.userId ?? 'anonymous' }
  },
})
const portable = defineTool({ name: 'echo', parameters: zodParameters, handler: (args) => args.city })
const appGate = new ToolExecutor<AppContext>()
appGate.register(whoami).register(portable)
// @ts-expect-error whoami reads AppContext, which a plain executor does not promise
gate.register(whoami)
// @ts-expect-error defineTool checks the return against outputSchema too
defineTool({ name: 'bad_out', outputSchema: z.object({ user: z.string() }), handler: () => ({ user: 1 }) })

// Registered schemas: typed, mutable lists as SDKs want them, and registrable again.
const [listed] = gate.list()
const required: string[] | undefined = listed.parameters.required
const anthropicTool: Anthropic.Tool = { name: listed.name, input_schema: listed.parameters }
const schema: ObjectJsonSchema = listed.parameters
gate.register({ name: 'again', parameters: schema, replace: true, handler: (args) => true satisfies Equal<typeof args, Record<string, unknown>> })
void [required, anthropicTool]
