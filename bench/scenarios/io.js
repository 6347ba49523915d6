'use strict'
// Handlers that await I/O, as every real tool does. One call at a time: a 1 ms timer, and a line read back from a
// server on loopback; what each contender spends on the JS thread beyond the await itself (the floor calls the
// handler directly) is the cost of its pipeline on the path real tools take. Then a server's shape: many sessions
// at once, each running turns of realistic calls whose handlers await I/O; the turns' latency and how busy the JS
// thread is. Prints one JSON line.

const net = require('node:net')
const { once } = require('node:events')
const { PAGES, compare, contenders, functionCalls, pageTool, summarize, threadCpuNs } = require('../lib')

const SAMPLES = Number(process.env.BENCH_SAMPLES ?? 9)
const CALLS_PER_SAMPLE = Number(process.env.BENCH_IO_CALLS ?? 400)
const SESSIONS = Number(process.env.BENCH_SESSIONS ?? 100)
const TURNS_PER_SESSION = Number(process.env.BENCH_SESSION_TURNS ?? 10)
const CALLS_PER_TURN = 8

const parameters = { type: 'object', properties: { n: { type: 'integer' } }, required: ['n'], additionalProperties: false }

const timer = {
  name: 'wait',
  description: 'Waits a millisecond, then answers.',
  parameters,
  readOnly: true,
  handler: ({ n }) => new Promise((resolve) => setTimeout(() => resolve(n + 1), 1)),
}

/** A server on loopback that answers each line with the same line; a client whose requests each await their reply. */
async function echo() {
  const server = net.createServer((socket) => socket.pipe(socket))
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  const socket = net.connect(server.address().port, '127.0.0.1')
  await once(socket, 'connect')
  socket.setNoDelay(true)
  socket.setEncoding('utf8')
  const waiting = []
  let buffered = ''
  socket.on('data', (chunk) => {
    buffered += chunk
    let end
    while ((end = buffered.indexOf('\n')) >= 0) {
      const line = buffered.slice(0, end)
      buffered = buffered.slice(end + 1)
      waiting.shift()(line)
    }
  })
  const request = (line) => new Promise((resolve) => {
    waiting.push(resolve)
    socket.write(`${line}\n`)
  })
  const close = () => {
    socket.destroy()
    server.close()
  }
  return { request, close }
}

async function oneAtATime(tool) {
  const list = await contenders([tool])
  const out = await compare(list, () => Array.from({ length: CALLS_PER_SAMPLE }, (_, i) => functionCalls(tool.name, [{ n: i }])), SAMPLES)
  await Promise.all(list.map((c) => c.close()))
  return out
}

/** A page of a document, after 1 to 3 ms of I/O: a realistic call's handler. */
const fetchPage = {
  ...pageTool,
  name: 'fetch_page',
  description: 'Fetches one page of a document.',
  handler: ({ page: p }) => new Promise((resolve) => setTimeout(() => resolve(PAGES[p % PAGES.length]), 1 + (p % 3))),
}

/** Every session's turns at once, each session's one after another: the latency of each turn, the share of the
 * wall time the JS thread was busy, and the wall time. */
async function sampleSessions(execute, next) {
  const latencies = []
  const session = async (s) => {
    for (let t = 0; t < TURNS_PER_SESSION; t++) {
      const calls = functionCalls('fetch_page', Array.from({ length: CALLS_PER_TURN }, () => ({ doc: `s${s}`, page: next() })), `s${s}t${t}c`)
      const started = process.hrtime.bigint()
      await execute(calls)
      latencies.push(Number(process.hrtime.bigint() - started) / 1e6)
    }
  }
  await new Promise(setImmediate)
  const thread0 = threadCpuNs()
  const t0 = process.hrtime.bigint()
  await Promise.all(Array.from({ length: SESSIONS }, (_, s) => session(s)))
  const wallNs = Number(process.hrtime.bigint() - t0)
  latencies.sort((a, b) => a - b)
  return { p50: latencies[Math.floor(latencies.length / 2)], p99: latencies[Math.ceil(latencies.length * 0.99) - 1], busy: (threadCpuNs() - thread0) / wallNs, wall: wallNs / 1e6 }
}

/** The sessions scenario, its contenders interleaved sample by sample; every call a cache miss. */
async function sessions() {
  const list = await contenders([fetchPage], { aiSdk: false })
  let page = 0
  const next = () => page++
  const figures = new Map(list.map((c) => [c.name, {}]))
  for (const c of list) await sampleSessions(c.execute, next)
  for (let s = 0; s < SAMPLES; s++) {
    for (const c of list) {
      if (global.gc) global.gc()
      const one = await sampleSessions(c.execute, next)
      const into = figures.get(c.name)
      for (const [k, v] of Object.entries(one)) (into[k] ??= []).push(v)
    }
  }
  await Promise.all(list.map((c) => c.close()))
  return Object.fromEntries([...figures].map(([name, f]) => [name, Object.fromEntries(Object.entries(f).map(([k, xs]) => [k, summarize(xs)]))]))
}

async function main() {
  const server = await echo()
  const socketRead = {
    name: 'lookup',
    description: 'Asks a service on loopback.',
    parameters,
    readOnly: true,
    handler: ({ n }) => server.request(String(n)),
  }
  const result = { timer: await oneAtATime(timer), socket: await oneAtATime(socketRead), sessions: await sessions() }
  server.close()
  console.log(JSON.stringify(result))
}

main().catch((err) => {
  console.error(err)
  process.exit(1)
})
