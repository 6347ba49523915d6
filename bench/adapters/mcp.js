'use strict'
// What toolgate/mcp costs per call on an MCP tool's round trip: one trivial tool (`echo`, mcp-echo-server.js) of a
// server spawned over stdio, called (a) by the SDK's Client directly, `client.callTool`, and (b) mounted on a gate
// with mountMcp and run by `gate.execute`. Both go through the same Client, to the same server process, so the
// pipe and the server's work are alike in both and the difference is what the mount and the gate add in the
// client. A third row, gate.execute of a local handler answering the same (no MCP), shows how much of that is the
// gate's own pipeline; it takes no part in the difference. Two shapes: sequential round trips, one call at a time;
// and batches of 16 read-only calls at once (Promise.all of callTool against one gate.execute of 16 calls). Every
// call gets a fresh n, and the mount caches nothing, so that every call goes to the server. The contenders run
// interleaved in one process, so their differences hold on a noisy machine. Every call must succeed, with n + 1: a
// failing one costs less and would flatter its contender, so a failure stops the run.
// Run: node --expose-gc bench/adapters/mcp.js [samples]

const fs = require('node:fs')
const path = require('node:path')
const { Client } = require('@modelcontextprotocol/sdk/client/index.js')
const { StdioClientTransport } = require('@modelcontextprotocol/sdk/client/stdio.js')
const { ToolExecutor } = require('../..')
const { mountMcp } = require('toolgate/mcp')
const { compare } = require('../lib.js')
const { echo } = require('./mcp-echo-server.js')

const SAMPLES = Number(process.argv[2] ?? 11)
const BATCH = 16
const SEQUENTIAL_CALLS_PER_SAMPLE = 2_000
const BATCHED_CALLS_PER_SAMPLE = 3_200
const SERVER = path.join(__dirname, 'mcp-echo-server.js')
/** The SDK's version, from its package.json (which its exports do not reach). */
const SDK_VERSION = JSON.parse(fs.readFileSync(path.resolve(require.resolve('@modelcontextprotocol/sdk/client/index.js'), '../../../../package.json'), 'utf8')).version

/** Fails the run at once should a call not answer n + 1. */
function check(call, ok, text, detail) {
  if (!ok || text !== String(call.arguments.n + 1)) throw new Error(`call ${call.id} (n = ${call.arguments.n}) failed: ${JSON.stringify(detail)}`)
}

function contenders(client, gate) {
  return [
    {
      name: 'SDK client.callTool',
      execute: (turn) => Promise.all(turn.map(async (call) => {
        const result = await client.callTool({ name: 'echo', arguments: call.arguments })
        check(call, result.isError !== true, result.content?.[0]?.text, result)
      })),
    },
    { name: 'toolgate: mountMcp + gate.execute', execute: gateRun(gate, (turn) => turn) },
    { name: 'gate.execute, local handler (no MCP; for reference)', execute: gateRun(gate, (turn) => turn.map((call) => ({ ...call, name: 'local_echo' }))) },
  ]
}

function gateRun(gate, calls) {
  return async (turn) => {
    const results = await gate.execute(calls(turn))
    turn.forEach((call, i) => check(call, results[i]?.success === true, results[i]?.output, results[i]))
  }
}

/** `count` calls in turns of `size`, each with an n no call had before. */
let nextN = 0
function makeTurns(count, size) {
  return Array.from({ length: count / size }, () => Array.from({ length: size }, () => {
    const n = nextN++
    return { id: `c${n}`, name: 'bench__echo', arguments: { n } }
  }))
}

const num = (x) => x.toFixed(1)
/** The median of the per-sample differences a − b: the samples were taken side by side. */
const pairedDifference = (a, b) => a.values.map((x, i) => x - b.values[i]).sort((x, y) => x - y)[Math.floor(a.values.length / 2)]

function table(title, list, figures) {
  console.log(`\n${title}\n`)
  console.log('| contender | wall µs/call | JS-thread CPU µs/call | process CPU µs/call |')
  console.log('|---|---|---|---|')
  for (const c of list) {
    const f = figures[c.name]
    console.log(`| ${c.name} | ${num(f.wall.median)} | ${num(f.thread.median)} | ${num(f.process.median)} |`)
  }
}

/** toolgate minus callTool, per call: the median of the paired differences, and that against callTool's median. */
function added(direct, gated) {
  return ['wall', 'thread', 'process'].map((k) => {
    const difference = pairedDifference(gated[k], direct[k])
    return `${num(difference)} (${difference >= 0 ? '+' : ''}${((difference / direct[k].median) * 100).toFixed(0)}%)`
  })
}

async function main() {
  const transport = new StdioClientTransport({ command: process.execPath, args: [SERVER], stderr: 'inherit' })
  const client = new Client({ name: 'bench', version: '1.0.0' })
  // Read-only calls of one turn run together, all of them (the gate's concurrency set to the batch).
  const gate = new ToolExecutor({ concurrency: BATCH, dedup: { policy: 'off' }, otel: false })
  try {
    await client.connect(transport)
    const mount = await mountMcp(gate, client, { prefix: 'bench', trust: true, tools: { cache: false } })
    if (mount.nameOf('echo') !== 'bench__echo') throw new Error(`echo was not mounted: ${JSON.stringify(mount.skipped)}`)
    gate.register({ name: 'local_echo', description: echo.description, parameters: echo.inputSchema, readOnly: true, idempotent: true, cache: false, handler: async ({ n }) => String(n + 1) })
    const list = contenders(client, gate)
    const sequential = await compare(list, () => makeTurns(SEQUENTIAL_CALLS_PER_SAMPLE, 1), SAMPLES)
    const batched = await compare(list, () => makeTurns(BATCHED_CALLS_PER_SAMPLE, BATCH), SAMPLES)
    const shapes = [
      [`sequential round trips, one call per turn (${SEQUENTIAL_CALLS_PER_SAMPLE} calls per sample)`, 'sequential, 1 call per turn', sequential],
      [`${BATCH} read-only calls at once per turn (${BATCHED_CALLS_PER_SAMPLE} calls per sample)`, `${BATCH} calls at once per turn`, batched],
    ]
    console.log(`node ${process.version}, @modelcontextprotocol/sdk ${SDK_VERSION}; one server process over stdio, one Client; ${SAMPLES} samples; median µs per call`)
    for (const [title, , figures] of shapes) table(title, list, figures)
    console.log('\n| added by toolgate/mcp, per call (median of paired differences; against callTool) | wall µs | JS-thread CPU µs | process CPU µs |')
    console.log('|---|---|---|---|')
    for (const [, shape, figures] of shapes) console.log(`| ${shape} | ${added(figures[list[0].name], figures[list[1].name]).join(' | ')} |`)
  } finally {
    await gate.close()
    await client.close()
  }
}

main().catch((err) => {
  console.error(err)
  process.exitCode = 1
})
