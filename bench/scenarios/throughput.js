'use strict'
// Turns of calls back to back: trivial calls at several batch sizes, realistic calls (2 KB outputs, redaction,
// cache misses) and cache hits. Prints one JSON line: the figures per scenario and contender.

const { z } = require('zod')
const { PAGES, compare, contenders, functionCalls, pageTool } = require('../lib')

const SAMPLES = Number(process.env.BENCH_SAMPLES ?? 9)
const CALLS_PER_SAMPLE = Number(process.env.BENCH_CALLS ?? 8192)

const inc = {
  name: 'inc',
  description: 'Adds one to n.',
  parameters: { type: 'object', properties: { n: { type: 'integer' } }, required: ['n'], additionalProperties: false },
  zodSchema: z.object({ n: z.number().int() }).strict(),
  readOnly: true,
  handler: async ({ n }) => n + 1,
}

const readPage = {
  ...pageTool,
  name: 'read_page',
  description: 'Reads one page of a document.',
  zodSchema: z.object({ doc: z.string(), page: z.number().int().min(0) }).strict(),
  handler: async ({ page: p }) => PAGES[p % PAGES.length],
}

/** A sample's turns: `calls` calls in turns of `batch`, each built by `argsAt(index)`. */
function turnsOf(name, batch, argsAt) {
  const count = Math.max(1, Math.floor(CALLS_PER_SAMPLE / batch))
  return Array.from({ length: count }, (_, t) => functionCalls(name, Array.from({ length: batch }, (_, i) => argsAt(t * batch + i))))
}

async function trivial() {
  const list = await contenders([inc])
  const out = {}
  for (const batch of [1, 16, 256, 4096]) {
    out[batch] = await compare(list, () => turnsOf('inc', batch, (i) => ({ n: i })), SAMPLES)
  }
  await Promise.all(list.map((c) => c.close()))
  return out
}

async function realistic() {
  const list = await contenders([readPage])
  let next = 0 // every call asks for a page no call asked before: each one is a cache miss
  const out = await compare(list, () => turnsOf('read_page', 16, () => ({ doc: `guide-${next}`, page: next++ })), SAMPLES)
  await Promise.all(list.map((c) => c.close()))
  return out
}

async function cacheHits() {
  const list = (await contenders([readPage], { aiSdk: false }))
  const turns = () => turnsOf('read_page', 16, (i) => ({ doc: 'guide', page: i % 16 }))
  for (const c of list) await c.execute(turns()[0]) // the 16 pages every later call asks for are now cached
  const out = await compare(list, turns, SAMPLES)
  await Promise.all(list.map((c) => c.close()))
  return out
}

async function main() {
  const result = { trivial: await trivial(), realistic: await realistic(), cacheHits: await cacheHits() }
  console.log(JSON.stringify(result))
}

main().catch((err) => {
  console.error(err)
  process.exit(1)
})
