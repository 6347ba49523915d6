'use strict'
// Command tools: processes the engine spawns in a group of their own, reads into bounded buffers and stops whole.
// What is checked is what the system says (/proc), not what the result claims.

const { describe, it, after } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const { ToolExecutor } = require('..')
const { readCommandSpec } = require('../lib/commands.js')
const { assertFailure, assertSuccess } = require('./helpers')

const onLinux = process.platform === 'linux'
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
const one = (gate, name, args = {}, options) => gate.execute([{ name, arguments: args }], options).then((r) => r[0])

/** Processes running now (not zombies) whose command line holds `marker`. */
function running(marker) {
  const found = []
  for (const pid of fs.readdirSync('/proc').filter((n) => /^\d+$/.test(n))) {
    try {
      const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8')
      const state = stat.slice(stat.lastIndexOf(')') + 2).split(' ')[0]
      const cmdline = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ')
      if (state !== 'Z' && state !== 'X' && cmdline.includes(marker) && Number(pid) !== process.pid) found.push(Number(pid))
    } catch {
      // The process ended while it was read.
    }
  }
  return found
}

/** Waits up to `ms` for no process with `marker` to run; how many still do at the end. */
async function goneWithin(marker, ms) {
  const until = Date.now() + ms
  while (running(marker).length > 0 && Date.now() < until) await sleep(20)
  return running(marker).length
}

/** A shell command that starts two grandchildren and waits for them; its sleeps are told apart by `marker`. */
const grandchildren = (marker, prefix = '') => ({ shell: `${prefix}sleep 300.${marker} & sleep 301.${marker} & wait` })
let markers = 1000
const newMarker = () => String(markers++) + String(process.pid)

const gates = []
function executor(options) {
  const gate = new ToolExecutor(options)
  gates.push(gate)
  return gate
}
after(() => Promise.all(gates.map((g) => g.close())))

describe('command tools: stopping', { skip: !onLinux && 'reads /proc' }, () => {
  it('a timeout stops the command and its grandchildren: SIGTERM to the group, nothing left running', async () => {
    const gate = executor()
    const marker = newMarker()
    gate.registerCommand({ name: 'spawner', timeoutMs: 400, killGraceMs: 1_000, command: () => grandchildren(marker) })
    const pending = one(gate, 'spawner')
    await sleep(200)
    assert.equal(running(marker).length, 3, 'the shell and both grandchildren run before the timeout')
    const result = await pending
    assertFailure(result, 'timeout')
    assert.match(result.error, /time limit of 400 ms\. It was stopped with SIGTERM; no process of it is still running/)
    assert.equal(result.metadata.command.stoppedWith, 'SIGTERM')
    assert.equal(result.metadata.command.endedBy, 'timeout')
    assert.equal(result.metadata.command.signal, 'SIGTERM')
    assert.equal(running(marker).length, 0, 'no process of the group runs once the result is in')
  })

  it('a command that ignores SIGTERM is killed with SIGKILL once the grace ends', async () => {
    const gate = executor()
    const marker = newMarker()
    gate.registerCommand({ name: 'stubborn', timeoutMs: 300, killGraceMs: 400, command: () => grandchildren(marker, "trap '' TERM; ") })
    const began = Date.now()
    const result = await one(gate, 'stubborn')
    const took = Date.now() - began
    assertFailure(result, 'timeout')
    assert.equal(result.metadata.command.stoppedWith, 'SIGKILL')
    assert.equal(result.metadata.command.signal, 'SIGKILL')
    assert.ok(took >= 700, `SIGKILL came after the grace (took ${took} ms)`)
    assert.match(result.error, /stopped with SIGKILL; no process of it is still running/)
    assert.equal(running(marker).length, 0)
  })

  it('cancelling the turn stops the whole group within the grace', async () => {
    const gate = executor()
    const marker = newMarker()
    gate.registerCommand({ name: 'long', timeoutMs: 60_000, killGraceMs: 500, command: () => grandchildren(marker) })
    const controller = new AbortController()
    const pending = one(gate, 'long', {}, { signal: controller.signal })
    await sleep(200)
    assert.equal(running(marker).length, 3)
    controller.abort()
    assertFailure(await pending, 'cancelled')
    assert.equal(await goneWithin(marker, 500 + 500), 0)
  })

  // The grace for SIGTERM shorter, then longer, than close()'s default wait for handlers (1 s).
  for (const killGraceMs of [300, 1_500]) {
    it(`close() stops running commands and resolves once they are gone (killGraceMs ${killGraceMs})`, async () => {
      const gate = new ToolExecutor()
      const marker = newMarker()
      gate.registerCommand({ name: 'long', timeoutMs: 60_000, killGraceMs, command: () => grandchildren(marker, "trap '' TERM; ") })
      const pending = one(gate, 'long')
      await sleep(200)
      assert.equal(running(marker).length, 3)
      await gate.close()
      assert.equal(running(marker).length, 0, 'nothing runs once close() resolved')
      assertFailure(await pending, 'cancelled')
    })
  }

  it('what a command leaves running when it exits is stopped, and the result says so', async () => {
    const gate = executor()
    const marker = newMarker()
    gate.registerCommand({ name: 'leaver', killGraceMs: 300, command: () => ({ shell: `sleep 302.${marker} > /dev/null 2>&1 & echo started` }) })
    const result = await one(gate, 'leaver')
    assertSuccess(result)
    assert.equal(result.metadata.command.leftoversStopped, true)
    assert.match(result.output, /started\n\[it exited leaving processes behind\. It was stopped with SIGTERM/)
    assert.equal(running(marker).length, 0)
  })
})

describe('command tools: processes that make groups of their own', { skip: !onLinux && 'reads /proc' }, () => {
  // coreutils `timeout` and job-control shells stay in the command's session but leave its first process group.
  const escapers = {
    'coreutils timeout': (marker) => ({ shell: `timeout 25 sleep 304.${marker}; echo after` }),
    'a job-control shell': (marker) => ({ argv: ['bash', '-c', `set -m; sleep 305.${marker} & wait`] }),
  }

  for (const [what, command] of Object.entries(escapers)) {
    it(`a timeout stops ${what} and what it runs, and says nothing is left`, async () => {
      const gate = executor()
      const marker = newMarker()
      gate.registerCommand({ name: 'escaper', timeoutMs: 400, killGraceMs: 500, command: () => command(marker) })
      const pending = one(gate, 'escaper')
      await sleep(200)
      assert.ok(running(marker).length >= 1, 'its sleep runs before the timeout')
      const result = await pending
      assertFailure(result, 'timeout')
      assert.equal(running(marker).length, 0, 'nothing of the session runs once the result is in')
      assert.match(result.error, /no process of it is still running/)
      assert.equal(result.metadata.command.stillRunning, undefined)
    })

    it(`close() stops ${what} and resolves once it is gone`, async () => {
      const gate = new ToolExecutor()
      const marker = newMarker()
      gate.registerCommand({ name: 'escaper', timeoutMs: 60_000, killGraceMs: 300, command: () => command(marker) })
      const pending = one(gate, 'escaper')
      await sleep(200)
      assert.ok(running(marker).length >= 1)
      await gate.close()
      assert.equal(running(marker).length, 0, 'nothing runs once close() resolved')
      assertFailure(await pending, 'cancelled')
    })
  }

  it('what a command leaves running in another group with its output redirected is stopped, and the result says so', async () => {
    const gate = executor()
    const marker = newMarker()
    gate.registerCommand({ name: 'leaver', killGraceMs: 300, command: () => ({ shell: `timeout 25 sleep 306.${marker} > /dev/null 2>&1 & echo started` }) })
    const result = await one(gate, 'leaver')
    assertSuccess(result)
    assert.equal(result.metadata.command.leftoversStopped, true)
    assert.match(result.output, /started\n\[it exited leaving processes behind\. It was stopped with SIGTERM; no process of it is still running/)
    assert.equal(running(marker).length, 0)
  })

  it('a process that leaves the session stays out of reach, and the result does not claim it stopped', async () => {
    const gate = executor()
    const marker = newMarker()
    gate.registerCommand({ name: 'daemon', timeoutMs: 300, killGraceMs: 200, command: () => ({ shell: `setsid sleep 307.${marker} & sleep 308.${marker}` }) })
    const result = await one(gate, 'daemon')
    assertFailure(result, 'timeout')
    assert.equal(running(`308.${marker}`).length, 0, 'what stayed in the session is stopped')
    assert.equal(running(`307.${marker}`).length, 1, 'what left it runs on, as documented')
    assert.match(result.error, /Something it started is still running/)
    for (const pid of running(marker)) process.kill(pid, 'SIGKILL')
  })
})

describe('command tools: time limits', { skip: !onLinux && 'reads /proc' }, () => {
  it('silence past idleTimeoutMs stops a command that keeps running', async () => {
    const gate = executor()
    const marker = newMarker()
    gate.registerCommand({ name: 'quiet', timeoutMs: 10_000, idleTimeoutMs: 300, killGraceMs: 300, command: () => ({ shell: `echo hello; sleep 303.${marker}` }) })
    const began = Date.now()
    const result = await one(gate, 'quiet')
    assertFailure(result, 'idle_timeout')
    assert.ok(Date.now() - began < 3_000)
    assert.match(result.error, /wrote no output for 300 ms \(its idle limit\)/)
    assert.match(result.error, /\[stdout before it was stopped\]\nhello/)
    assert.equal(running(marker).length, 0)
  })

  it('steady output keeps a command alive past its idle limit until its total limit', async () => {
    const gate = executor()
    const lines = []
    gate.registerCommand({
      name: 'ticker', timeoutMs: 900, idleTimeoutMs: 250, killGraceMs: 300,
      command: () => ({ shell: 'i=0; while :; do i=$((i+1)); echo tick$i; sleep 0.05; done' }),
    })
    const result = await one(gate, 'ticker', {}, { onProgress: (event) => lines.push(event.info.line) })
    assertFailure(result, 'timeout')
    assert.ok(result.metadata.command.durationMs >= 900, `it ran to its total limit (${result.metadata.command.durationMs} ms)`)
    assert.ok(lines.length >= 2 && lines.length <= 10, `progress came at a bounded rate: ${lines.length} lines`)
    assert.match(lines[0], /^tick\d+$/)
  })

  it("onTimeout: 'background' keeps it running as a job the job tools read and stop", async () => {
    const gate = executor()
    const marker = newMarker()
    gate.registerCommand({
      name: 'build', timeoutMs: 300, killGraceMs: 300, onTimeout: 'background',
      command: () => ({ shell: `echo first; sleep 0.5; echo second; exec sleep 304.${marker}` }),
    })
    const started = await one(gate, 'build')
    assertSuccess(started)
    const { jobId } = started.metadata.command
    assert.equal(started.metadata.command.endedBy, 'background')
    assert.match(started.output, new RegExp(`moved to the background as job ${jobId}\\. Read what it writes with job_output`))
    assert.match(started.output, /\[stdout so far\]\nfirst/)
    await sleep(700)
    const output = await one(gate, 'job_output', { jobId })
    assertSuccess(output)
    assert.equal(output.metadata.structured.text, 'first\nsecond\n')
    assert.equal(output.metadata.structured.state, 'running')
    const more = await one(gate, 'job_output', { jobId, offset: 6 })
    assert.equal(more.metadata.structured.text, 'second\n')
    const status = await one(gate, 'job_status', { jobId })
    assert.equal(status.metadata.structured.state, 'running')
    assert.equal(running(marker).length, 1)
    const killed = await one(gate, 'job_kill', { jobId })
    assertSuccess(killed)
    assert.equal(killed.metadata.structured.state, 'ended')
    assert.equal(killed.metadata.structured.signal, 'SIGTERM')
    assert.equal(running(marker).length, 0)
    assertFailure(await one(gate, 'job_status', { jobId: 999 }), 'handler_error')
  })

  it('close() ends background jobs', async () => {
    const gate = new ToolExecutor()
    const marker = newMarker()
    gate.registerCommand({ name: 'bg', timeoutMs: 200, killGraceMs: 300, onTimeout: 'background', command: () => ({ shell: `exec sleep 305.${marker}` }) })
    assertSuccess(await one(gate, 'bg'))
    assert.equal(running(marker).length, 1)
    await gate.close()
    assert.equal(running(marker).length, 0)
  })
})

describe('command tools: output', () => {
  it('1 GB of output is captured in bounded memory with its tail intact and the middle in an artifact', async () => {
    const gate = executor()
    gate.registerCommand({ name: 'flood', timeoutMs: 60_000, command: () => ({ shell: 'yes | head -c 1000000000; echo THE-END' }) })
    const before = process.memoryUsage().rss
    let peak = before
    const sampler = setInterval(() => { peak = Math.max(peak, process.memoryUsage().rss) }, 10)
    const result = await one(gate, 'flood')
    clearInterval(sampler)
    peak = Math.max(peak, process.memoryUsage().rss)
    assertSuccess(result)
    const { command, structured } = result.metadata
    assert.equal(command.stdoutBytes, 1_000_000_000 + 'THE-END\n'.length)
    assert.ok(structured.stdout.endsWith('y\ny\nTHE-END\n'), 'the tail is intact')
    assert.ok(structured.stdout.startsWith('y\ny\n'))
    // What was kept where, said where the bytes are missing and first in what the model reads.
    const [, omitted, kept, dropped] = structured.stdout.match(/\[… (\d+) bytes left out here; the artifact \S+ keeps the (\d+) that follow these lines, and the (\d+) after those were not kept …\]/).map(Number)
    assert.equal(omitted, kept + dropped)
    assert.deepEqual([command.stdoutOmittedBytes, command.stdoutDroppedBytes], [omitted, dropped])
    // The result is too long for the context and cut again: this line is the first the model reads after that note.
    assert.equal(result.output.split('\n')[1], `[stdout: ${command.stdoutBytes} bytes written, ${omitted} of them left out of this result; the artifact ${command.stdoutArtifact} keeps ${command.stdoutBytes - dropped} of them; ${dropped} bytes of its middle were kept nowhere.]`)
    assert.ok(fs.statSync(command.stdoutArtifact).size > 8 * 1024 * 1024, 'the artifact holds the head and the spilled middle')
    const growthMb = (peak - before) / 1024 / 1024
    assert.ok(growthMb < 64, `RSS grew ${growthMb.toFixed(1)} MB`)
  })

  it('a stream longer than the result but within what its artifact holds: the model reads that all of it is saved', async () => {
    const gate = executor()
    gate.registerCommand({ name: 'some', command: () => ({ shell: 'yes | head -c 3000000' }) })
    const result = await one(gate, 'some')
    assertSuccess(result)
    const { command, structured } = result.metadata
    assert.equal(command.stdoutDroppedBytes, undefined, 'nothing was kept nowhere')
    assert.ok(command.stdoutOmittedBytes > 0)
    assert.equal(result.output.split('\n')[1], `[stdout: 3000000 bytes written, ${command.stdoutOmittedBytes} of them left out of this result; the artifact ${command.stdoutArtifact} keeps all of it.]`)
    assert.match(structured.stdout, /\[… \d+ bytes left out here; the whole output is saved in the artifact \S+ …\]/)
    assert.equal(fs.statSync(command.stdoutArtifact).size, 3_000_000)
    await gate.close()
  })

  it('invalid UTF-8 and NUL bytes become U+FFFD; stdin is delivered; exit codes and signals are reported', async () => {
    const gate = executor()
    gate.registerCommand({ name: 'bytes', command: () => ({ shell: "printf 'a\\000b\\377c'" }) })
    gate.registerCommand({ name: 'cat', command: ({ text }) => ({ argv: ['cat'], stdin: text }) })
    gate.registerCommand({ name: 'exit3', command: () => ({ shell: 'echo out; echo err >&2; exit 3' }) })
    gate.registerCommand({ name: 'strict', failOnExitCode: true, command: () => ({ shell: 'echo out; exit 3' }) })
    gate.registerCommand({ name: 'signalled', command: () => ({ shell: 'kill -USR1 $$' }) })
    const [bytes, cat, exit3, strict, signalled] = await gate.execute([
      { name: 'bytes', arguments: {} },
      { name: 'cat', arguments: { text: 'hello\nworld ✓' } },
      { name: 'exit3', arguments: {} },
      { name: 'strict', arguments: {} },
      { name: 'signalled', arguments: {} },
    ])
    assert.equal(bytes.metadata.structured.stdout, 'a\uFFFDb\uFFFDc')
    assert.equal(cat.output, 'hello\nworld ✓')
    assertSuccess(exit3)
    assert.equal(exit3.metadata.command.exitCode, 3)
    assert.equal(exit3.output, 'out\n[exit code 3]\n[stderr] err')
    assertFailure(strict, 'handler_error')
    assert.match(strict.error, /its command exited with code 3\.\n\[stdout output\]\nout/)
    assert.equal(signalled.metadata.command.signal, 'SIGUSR1')
    assert.equal(signalled.metadata.exitCode, 'SIGUSR1')
  })

  it('secrets in output are redacted, in the result and in the artifact', async () => {
    const gate = executor()
    const token = 'ghp_' + 'A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8'
    gate.registerCommand({ name: 'leaky', captureBytes: 4096, command: () => ({ shell: `echo ${token}; head -c 100000 /dev/zero | tr '\\0' x; echo; echo ${token}` }) })
    const result = await one(gate, 'leaky')
    assertSuccess(result)
    assert.ok(!JSON.stringify(result).includes(token), 'the token is nowhere in the result')
    assert.ok(!fs.readFileSync(result.metadata.command.stdoutArtifact, 'utf8').includes(token), 'nor in the artifact')
  })

  it('the lines a command reports as progress are redacted', async () => {
    const gate = executor()
    const token = `ghp_${'Zq4R8sT2vW6xY1bN3mK5pL7jH9gF0dC2aE4x'}`
    // A line longer than a progress line is cut to, the token at its end; a token written in two pieces.
    const shell = `echo "password=hunter2hunter2 ${token}"; sleep 0.3; echo "${'x'.repeat(165)} ${token}"; sleep 0.3; `
      + `printf 'key ${token.slice(0, 25)}'; sleep 0.3; printf '${token.slice(25)} ok\\n'; sleep 0.3; echo done`
    gate.registerCommand({ name: 'leaky', command: () => ({ shell }) })
    const lines = []
    assertSuccess(await one(gate, 'leaky', {}, { onProgress: (event) => lines.push(event.info.line) }))
    assert.ok(lines.length >= 3, lines.join('\n'))
    const seen = lines.join('\n')
    for (const piece of [token.slice(0, 12), token.slice(25), 'hunter2hunter2']) assert.ok(!seen.includes(piece), seen)
    assert.ok(lines.includes('key [REDACTED:github-token] ok'), 'the line written in two pieces is reported whole')
  })

  it('running commands report their latest line to onProgress', async () => {
    const gate = executor()
    const lines = []
    gate.registerCommand({ name: 'steps', command: () => ({ shell: 'for i in 1 2 3; do echo step$i; sleep 0.3; done' }) })
    assertSuccess(await one(gate, 'steps', {}, { onProgress: (event) => lines.push(event.info.line) }))
    assert.deepEqual(lines, ['step1', 'step2', 'step3'])
  })
})

describe('command tools: environment and errors', () => {
  it("the server's secrets stay out of a command's environment unless the tool names them", async () => {
    process.env.TOOLGATE_TEST_SERVER_SECRET = 'value-only-the-server-has'
    try {
      const gate = executor()
      const command = () => ({ shell: 'echo "[$TOOLGATE_TEST_SERVER_SECRET] [$TOOL_SET] [${HOME:+home}]"' })
      gate.registerCommand({ name: 'plain', env: { TOOL_SET: 'yes' }, command })
      gate.registerCommand({ name: 'named', inheritEnv: ['TOOLGATE_TEST_SERVER_SECRET'], command })
      gate.registerCommand({ name: 'bare', inheritEnv: false, command })
      const [plain, named, bare] = await gate.execute([{ name: 'plain' }, { name: 'named' }, { name: 'bare' }])
      assert.equal(plain.output, '[] [yes] [home]')
      assert.equal(named.output, '[value-only-the-server-has] [] [home]')
      assert.equal(bare.output, '[] [] []')
    } finally {
      delete process.env.TOOLGATE_TEST_SERVER_SECRET
    }
  })

  it('a command that cannot start, and a command(args) that throws or answers nonsense, fail the call', async () => {
    const gate = executor()
    gate.registerCommand({ name: 'missing', command: () => ({ argv: ['/nonexistent/program', '-x'] }) })
    gate.registerCommand({ name: 'nowhere', cwd: '/nonexistent/folder', command: () => ({ argv: ['true'] }) })
    gate.registerCommand({ name: 'throws', command: () => { throw new Error('no command for that') } })
    gate.registerCommand({ name: 'nonsense', command: () => ({ argv: 'ls -l' }) })
    gate.registerCommand({ name: 'both', command: () => ({ argv: ['ls'], shell: 'ls' }) })
    const [missing, nowhere, throws, nonsense, both] = await gate.execute(['missing', 'nowhere', 'throws', 'nonsense', 'both'].map((name) => ({ name })))
    assertFailure(missing, 'handler_error')
    assert.match(missing.error, /"\/nonexistent\/program" could not be started: No such file or directory/)
    assert.equal(missing.metadata.command.endedBy, 'spawn_failed')
    assert.match(nowhere.error, /could not be started in "\/nonexistent\/folder"/)
    assert.match(throws.error, /no command for that/)
    assert.match(nonsense.error, /argv must be a non-empty list of strings; got "ls -l"/)
    assert.match(both.error, /either argv or shell/)
  })

  it('a spec that cannot work throws at registration; Windows is refused with what is missing', () => {
    const gate = executor()
    assert.throws(() => gate.registerCommand({ name: 'x', command: () => ({ argv: ['true'] }), handler: () => 1 }), /a command tool has no handler/)
    assert.throws(() => gate.registerCommand({ name: 'x', command: 'ls' }), /command must be a function/)
    assert.throws(() => gate.registerCommand({ name: 'x', onTimeout: 'later', command: () => ({ argv: ['true'] }) }), /onTimeout must be 'kill' or 'background'/)
    assert.throws(() => gate.registerCommand({ name: 'x', inheritEnv: 'PATH', command: () => ({ argv: ['true'] }) }), /inheritEnv must be true, false or a list/)
    assert.throws(() => gate.registerCommand({ name: 'x', env: { A: 1 }, command: () => ({ argv: ['true'] }) }), /env\.A must be a string/)
    assert.throws(() => gate.registerCommand({ name: 'x', captureBytes: 10, command: () => ({ argv: ['true'] }) }), /captureBytes must be at least 2048/)
    assert.throws(() => gate.registerCommand({ name: 'x', color: 'red', command: () => ({ argv: ['true'] }) }), /unknown option "color"/)
    assert.throws(() => readCommandSpec({ name: 'x', command: () => ({ argv: ['true'] }) }, 'win32'), /run only on Linux and macOS \(stopping a command's whole process tree on Windows needs Job Objects/)
    assert.equal(gate.list().length, 0, 'nothing was registered')
  })

  it('retries, permissions and rate limits apply to command tools as to any tool', async () => {
    const gate = executor({ permissions: { deny: [{ tool: 'bash', args: { cmd: 'rm *' } }] } })
    let attempts = 0
    gate.registerCommand({
      name: 'bash', parameters: { type: 'object', properties: { cmd: { type: 'string' } }, required: ['cmd'] },
      // A limit the second attempt's echo meets on a machine loaded by the whole suite; the first one's sleep never does.
      idempotent: true, cache: false, retry: { maxRetries: 2, initialDelayMs: 1, onTimeout: true }, timeoutMs: 1_500, killGraceMs: 100,
      command: ({ cmd }) => ({ shell: attempts++ === 0 ? 'sleep 30' : cmd }),
    })
    const [retried, denied] = await gate.execute([{ name: 'bash', arguments: { cmd: 'echo second try' } }, { name: 'bash', arguments: { cmd: 'rm -rf /tmp/x' } }])
    assertSuccess(retried)
    assert.equal(retried.output, 'second try')
    assert.equal(retried.attempts, 2)
    assertFailure(denied, 'permission_denied')
  })
})
