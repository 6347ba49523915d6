'use strict'
// `node bench/hop-spike/run.js`: builds the spike (cargo, release) and prints what the JS thread spends on a hop
// through a threadsafe function, alone, batched, after 1 ms idle, and in bursts, against a synchronous crossing.
// JS-thread CPU is read from /proc/thread-self/schedstat, which the kernel brings up to date at each switch: each
// figure is taken over many hops, so that its total spans thousands of switches.

const { execFileSync } = require('node:child_process')
const fs = require('node:fs')
const path = require('node:path')
const { threadCpuNs } = require('../lib')

execFileSync('cargo', ['build', '--release', '--quiet'], { cwd: __dirname, stdio: 'inherit' })
const binary = path.join(__dirname, 'hop-spike.node')
fs.copyFileSync(path.join(__dirname, 'target', 'release', 'libhop_spike.so'), binary)
const { Hop, echo } = require(binary)

/** `rounds` times: `items` sent at once, each on its own (`apart`) or as one batch, the next round when all are
 * back (after `pause` when given). JS-thread µs per item from the first send to the last callback, and wall µs. */
function hops({ items, rounds, apart = true, pause }) {
  return new Promise((resolve) => {
    let back = 0
    let round = 0
    const send = () => {
      if (apart) for (let i = 0; i < items; i++) hop.send(i, 1)
      else hop.send(0, items)
    }
    const thread0 = threadCpuNs()
    const wall0 = process.hrtime.bigint()
    const hop = new Hop((text) => {
      back += apart ? 1 : text.split(',').length
      if (back < items) return
      back = 0
      if (++round === rounds) {
        hop.close()
        const n = items * rounds
        resolve({ thread: (threadCpuNs() - thread0) / 1e3 / n, wall: Number(process.hrtime.bigint() - wall0) / 1e3 / n })
      } else if (pause) setTimeout(send, pause)
      else setImmediate(send)
    })
    send()
  })
}

async function main() {
  await hops({ items: 16, rounds: 500 }) // warm-up
  const rows = [
    ['one hop at a time, there and back', { items: 1, rounds: 20_000 }],
    ['one hop at a time, after 1 ms idle each', { items: 1, rounds: 2_000, pause: 1 }],
    ['16 hops at once', { items: 16, rounds: 2_500 }],
    ['256 hops at once', { items: 256, rounds: 160 }],
    ['4,096 hops at once', { items: 4096, rounds: 10 }],
    ['16 items in one hop', { items: 16, rounds: 2_500, apart: false }],
  ]
  console.log('| what | JS-thread CPU µs per item | wall µs per item |')
  console.log('|---|---|---|')
  for (const [what, shape] of rows) {
    const { thread, wall } = await hops(shape)
    console.log(`| ${what} | ${thread.toFixed(2)} | ${shape.pause ? '(includes the 1 ms)' : wall.toFixed(2)} |`)
  }
  const timers = 2_000
  let thread0 = threadCpuNs()
  for (let i = 0; i < timers; i++) await new Promise((resolve) => setTimeout(resolve, 1))
  console.log(`| the 1 ms timer alone, no hop (to take from the row with idle) | ${((threadCpuNs() - thread0) / 1e3 / timers).toFixed(2)} | |`)
  const n = 200_000
  thread0 = threadCpuNs()
  for (let i = 0; i < n; i++) echo(String(i))
  console.log(`| a synchronous crossing (what the engine's calls are today) | ${((threadCpuNs() - thread0) / 1e3 / n).toFixed(2)} | |`)
}

main().catch((err) => {
  console.error(err)
  process.exit(1)
})
