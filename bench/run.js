'use strict'
// `npm run bench`: runs every scenario of the suite in its own process and writes the suite's part of
// bench/RESULTS.md (the sections after it are run by hand and kept as they are).
// BENCH_SAMPLES, BENCH_CALLS, BENCH_HUNG and BENCH_MEMORY_CALLS shorten a run when trying things out.

const { execFileSync } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { run, versionOf } = require('./versions.js')

const RESULTS = path.join(__dirname, 'RESULTS.md')
const BEGIN = '<!-- suite: written by `npm run bench` -->'
const END = '<!-- end of suite: what follows is run by hand -->'

function scenario(file, ...args) {
  process.stderr.write(`bench: ${file} ${args.join(' ')}\n`)
  const out = execFileSync(process.execPath, ['--expose-gc', path.join(__dirname, 'scenarios', file), ...args], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
    maxBuffer: 64 * 2 ** 20,
  })
  return JSON.parse(out.trim().split('\n').pop())
}

// ── Formatting ────────────────────────────────────────────────────────────────────────────────────────────────────

const num = (x) => (x >= 100 ? x.toFixed(0) : x >= 10 ? x.toFixed(1) : x.toFixed(2))
const cell = (s) => `${num(s.median)} (${num(s.spread[0])}–${num(s.spread[1])})`

/** The median of the per-sample ratios a/b: samples were taken in pairs, side by side. */
function ratio(a, b) {
  const rs = a.values.map((x, i) => x / b.values[i]).sort((x, y) => x - y)
  return rs[Math.floor(rs.length / 2)]
}

const SESSIONS_LABEL = '100 sessions at once, turns of 8 realistic calls awaiting I/O'

const LABELS = {
  floor: 'floor: handlers called directly',
  reference: 'pure-JS reference pipeline',
  aisdk: 'AI SDK 5 `generateText`, mock model',
  toolgate: 'toolgate',
}

function figuresTable(byContender) {
  const rows = ['| contender | wall µs/call | JS-thread CPU µs/call | process CPU µs/call | event-loop lag max ms | RSS MB |', '|---|---|---|---|---|---|']
  for (const [name, f] of Object.entries(byContender)) {
    rows.push(`| ${LABELS[name]} | ${cell(f.wall)} | ${cell(f.thread)} | ${cell(f.process)} | ${cell(f.lagMax)} | ${num(f.rss.median)} |`)
  }
  return rows.join('\n')
}

// ── The run ───────────────────────────────────────────────────────────────────────────────────────────────────────

function main() {
  const throughput = scenario('throughput.js')
  const large = scenario('large.js')
  const deadline = scenario('deadline.js')
  const io = scenario('io.js')
  const memory = Object.fromEntries(['floor', 'reference', 'toolgate'].map((c) => [c, scenario('memory.js', c)]))

  const targets = []
  const target = (what, measured, goal, met) => targets.push(`| ${what} | ${measured} | ${goal} | ${met ? 'met' : '**missed**'} |`)
  /** toolgate's `figure` against the reference's in one scenario's `figures`: the median of the per-sample ratios. */
  const against = (what, figures, figure, goal) => {
    const r = ratio(figures.toolgate[figure], figures.reference[figure])
    target(what, `${r.toFixed(2)}×`, `≤ ${goal.toFixed(1)}×`, r <= goal)
  }
  for (const batch of [16, 256, 4096]) {
    against(`JS-thread CPU per call, trivial calls, batch ${batch}`, throughput.trivial[batch], 'thread', 0.8)
  }
  {
    const [at256, at4096] = [256, 4096].map((b) => throughput.trivial[b].toolgate.thread.median)
    const rise = at4096 / at256
    target('JS-thread CPU per call, trivial calls, batch 4096 against 256', `${rise.toFixed(2)}×`, '≤ 1.0× (no rise)', rise <= 1.0)
  }
  against('process CPU per call, trivial calls, batch 16', throughput.trivial[16], 'process', 0.8)
  against('JS-thread CPU per call, realistic calls (2 KB, redaction, cache misses)', throughput.realistic, 'thread', 0.5)
  against('latency of a single call (batch of 1, wall)', throughput.trivial[1], 'wall', 1.0)
  against('JS-thread CPU per cache hit', throughput.cacheHits, 'thread', 1.0)
  for (const [what, figures] of [['a 1 ms timer', io.timer], ['a socket read on loopback', io.socket]]) {
    const over = (name, figure) => figures[name][figure].median - figures.floor[figure].median
    const [thread, wall] = [over('toolgate', 'thread'), over('toolgate', 'wall') - over('reference', 'wall')]
    target(`a handler awaiting ${what}, one call at a time: JS-thread CPU over the bare await`, `+${num(thread)} µs (reference +${num(over('reference', 'thread'))} µs)`, '≤ +5 µs', thread <= 5)
    target(`a handler awaiting ${what}, one call at a time: wall over the reference's`, `${wall >= 0 ? '+' : ''}${num(wall)} µs`, '≤ +20 µs', wall <= 20)
  }
  {
    const [p99, busy] = ['p99', 'busy'].map((figure) => ratio(io.sessions.toolgate[figure], io.sessions.reference[figure]))
    target(`${SESSIONS_LABEL}: p99 turn latency`, `${p99.toFixed(2)}×`, '≤ 0.7×', p99 <= 0.7)
    target(`${SESSIONS_LABEL}: share of the time the JS thread is busy`, `${busy.toFixed(2)}×`, '≤ 0.5×', busy <= 0.5)
  }
  {
    const { p50, p99 } = deadline.toolgate
    target("a hung handler's timeout past its limit, p50 / p99", `${num(p50)} / ${num(p99)} ms`, '≤ 0.2 / 2 ms', p50 <= 0.2 && p99 <= 2)
  }
  against('a 10 MB output shaped: total time', large, 'total', 1.0)
  {
    const stall = large.toolgate.stall.median
    target('a 10 MB output shaped: longest event-loop stall', `${num(stall)} ms`, '< 10 ms', stall < 10)
  }
  {
    const m = memory.toolgate
    const growth = m.end.rss - m.start.rss
    target('RSS growth over 1,000,000 calls', `${growth.toFixed(1)} MB`, '< 20 MB', growth < 20)
    const leaked = m.resourcesAfter - m.resourcesBefore + m.inFlightAfter
    target('handles and calls left behind after 1,000,000 calls', String(leaked), '0', leaked <= 0)
  }

  const samples = throughput.trivial[1].toolgate.wall.values.length
  const cpu = os.cpus()[0]?.model ?? 'unknown CPU'
  const lines = [
    BEGIN,
    '',
    '## The suite',
    '',
    `Run on ${new Date().toISOString().slice(0, 10)}: ${os.cpus().length} × ${cpu}, ${Math.round(os.totalmem() / 2 ** 30)} GiB, ${os.type()} ${os.release()};`,
    `Node ${process.version}; ${run(['rustc', '--version'])}; toolgate ${versionOf('..')} at ${run(['git', '-C', path.join(__dirname, '..'), 'rev-parse', '--short', 'HEAD'])} (release build);`,
    `ajv ${versionOf('ajv')}, lru-cache ${versionOf('lru-cache')}, p-limit ${versionOf('p-limit')}, ai ${versionOf('ai')}, zod ${versionOf('zod')}.`,
    '',
    '**Method.** Every scenario runs in its own process (`node --expose-gc`). Within it the contenders run',
    `interleaved, sample by sample (${samples} samples each, after a warm-up; a garbage collection before each sample), so that`,
    'their ratios hold on a noisy machine; cells are the median and, in brackets, the 10th–90th percentile of the',
    'samples. Ratios are the median of the per-sample ratios. A sample is a run of turns back to back, yielding to the',
    'event loop between turns as a server does between requests. *JS-thread CPU* is the CPU time of the thread that',
    'runs JavaScript (`/proc/thread-self/schedstat`): what a Node server pays on its one busy thread. *Process CPU*',
    "adds every thread's (tokio's, the garbage collector's helpers). *Event-loop lag* is the longest delay",
    '`monitorEventLoopDelay` saw during the sample.',
    '',
    '**Contenders.** The *floor* parses the arguments and calls the handlers with `Promise.all`: no validation, no',
    'deadline, no result shaping. The *pure-JS reference pipeline* (`bench/contenders/reference.js`) does what toolgate',
    'does, by hand, with the usual libraries: ajv validation compiled once per tool, an lru-cache keyed by the canonical',
    'arguments, a token bucket, p-limit scheduling, a deadline per call (`setTimeout` + `Promise.race`, the',
    "AbortController made only when a handler reads its signal), retries, the same normalization, the same redaction rules as one combined `RegExp`, truncation",
    'with a spill file, and the same result objects. The *AI SDK* runs `generateText` with its mock model returning the',
    "turn's calls in one step and its own tool execution (zod validation, no deadline, no redaction, no cache).",
    '',
    '### Targets: toolgate against the reference, in the same run',
    '',
    '| target | measured | goal | |',
    '|---|---|---|---|',
    ...targets,
    '',
    '### Trivial calls',
    '',
    'Each call is an OpenAI Responses `function_call` whose JSON arguments `{"n": i}` are checked against a schema',
    '(`n` required, an integer); the handler is `async ({ n }) => n + 1`, read-only, so a batch runs concurrently.',
    '',
  ]
  for (const [batch, byContender] of Object.entries(throughput.trivial)) {
    lines.push(`Batch of ${batch}:`, '', figuresTable(byContender), '')
  }
  lines.push(
    '### Realistic calls',
    '',
    'Turns of 16 calls to a read-only, cached tool; each call asks for a page no call asked for before (a cache miss),',
    'and the handler returns 2 KB of text (prose, JSON, paths), one page in four with a live-looking GitHub token.',
    '',
    figuresTable(throughput.realistic),
    '',
    '### Cache hits',
    '',
    'The same tool; turns of 16 calls whose 16 results are already cached. (The AI SDK has no cache; the floor calls the',
    'handler.)',
    '',
    figuresTable(throughput.cacheHits),
    '',
    `### A ${(large.bytes / 2 ** 20).toFixed(1)} MiB output`,
    '',
    `One call whose handler returns ${(large.bytes / 2 ** 20).toFixed(1)} MiB of logs, JSON and UTF-8 prose with ${large.secrets} secrets; redacted, cut to a`,
    '2,000-character preview and saved whole to a file. Total is from `execute` to the result in hand.',
    '',
    '| contender | total ms | longest event-loop stall ms | JS-thread CPU ms |',
    '|---|---|---|---|',
    ...['toolgate', 'reference'].map((n) => `| ${LABELS[n]} | ${cell(large[n].total)} | ${cell(large[n].stall)} | ${cell(large[n].thread)} |`),
    '',
    '### Handlers that await I/O',
    '',
    'One call per turn, turns back to back, to a read-only tool whose handler awaits a 1 ms timer, or writes a line to',
    'a server on loopback and awaits its answer: the path real tools take. The floor calls the handler directly, so',
    "a contender's figures less the floor's are what its pipeline costs around the await.",
    '',
    'A 1 ms timer:',
    '',
    figuresTable(io.timer),
    '',
    'A socket read on loopback:',
    '',
    figuresTable(io.socket),
    '',
    'Many sessions at once: each of 100 sessions runs 10 turns one after another, all sessions at once; a turn is 8',
    'calls to a read-only tool that awaits 1–3 ms of I/O and returns 2 KB (a cache miss every time, redaction on).',
    "Latency is a turn's, from `execute` to its results; busy is the JS thread's CPU time over the wall time of the",
    'sample.',
    '',
    '| contender | turn p50 ms | turn p99 ms | JS thread busy | wall ms |',
    '|---|---|---|---|---|',
    ...['floor', 'reference', 'toolgate'].map((n) => {
      const f = io.sessions[n]
      return `| ${LABELS[n]} | ${cell(f.p50)} | ${cell(f.p99)} | ${cell(f.busy)} | ${cell(f.wall)} |`
    }),
    '',
    "### A hung handler's deadline",
    '',
    `${deadline.hung} calls to a handler that never settles and ignores its signal, each with a ${deadline.limitMs} ms limit,`,
    `${deadline.inFlight} in flight at random offsets, while turns of 16 small calls run back to back through the same contender.`,
    'The overshoot is from the call to its `timeout` result, less the limit.',
    '',
    '| contender | p50 overshoot ms | p90 | p99 | max | background calls meanwhile |',
    '|---|---|---|---|---|---|',
    ...[['toolgate', 'toolgate (a timer on the JS thread, the tokio watcher behind it)'], ['reference', LABELS.reference], ['race', 'bare `Promise.race` + `setTimeout`']].map(
      ([n, label]) => `| ${label} | ${num(deadline[n].p50)} | ${num(deadline[n].p90)} | ${num(deadline[n].p99)} | ${num(deadline[n].max)} | ${deadline[n].background} |`,
    ),
    '',
    '### 1,000,000 calls',
    '',
    'Trivial calls in turns of 16, fresh call objects every turn, one process per contender, after a 200,000-call',
    'warm-up (the JIT, and V8 growing its young generation to what the allocation rate keeps it at, which shows as',
    'RSS without being anything the contender holds). Memory after two forced garbage collections; RSS also read every',
    '100,000 calls (the peak).',
    '',
    '| contender | seconds | RSS start → end MB | peak RSS MB | JS heap start → end MB | handles before → after | calls left running |',
    '|---|---|---|---|---|---|---|',
    ...Object.values(memory).map(
      (m) =>
        `| ${LABELS[m.contender]} | ${num(m.seconds)} | ${num(m.start.rss)} → ${num(m.end.rss)} | ${num(m.peakRss)} | ${num(m.start.heap)} → ${num(m.end.heap)} | ${m.resourcesBefore} → ${m.resourcesAfter} | ${m.inFlightAfter} |`,
    ),
    '',
    END,
  )

  const old = fs.existsSync(RESULTS) ? fs.readFileSync(RESULTS, 'utf8') : '# Benchmark results\n'
  const head = old.includes(BEGIN) ? old.slice(0, old.indexOf(BEGIN)) : `${old.split('\n')[0]}\n\n`
  const tail = old.includes(END) ? old.slice(old.indexOf(END) + END.length) : `\n${old.split('\n').slice(1).join('\n')}`
  fs.writeFileSync(RESULTS, `${head}${lines.join('\n')}${tail}`)
  console.log(targets.join('\n'))
}

main()
