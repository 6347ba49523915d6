'use strict'
// Real redis-server processes for the tests of the Redis store (not a test file itself: `node --test` only picks up
// *.test.js). Each server gets a free loopback port and its own temporary directory, never 6379 (a developer's own
// Redis may live there), and every one still running is killed when the test process exits.

const fs = require('node:fs')
const net = require('node:net')
const os = require('node:os')
const path = require('node:path')
const { execFile, spawn } = require('node:child_process')

const READY_WITHIN_MS = 10_000
const POLL_MS = 25

const running = new Set()
const dirs = new Set()
const killAll = () => {
  for (const child of running) child.kill('SIGKILL')
  for (const dir of dirs) removeDir(dir)
}
process.on('exit', killAll)
// A signal (the test runner's timeout, Ctrl-C) ends the process without 'exit': kill the servers, then end of
// the signal as the process would have.
for (const signal of ['SIGINT', 'SIGTERM']) {
  process.once(signal, () => {
    killAll()
    process.kill(process.pid, signal)
  })
}

function makeDir(prefix) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix))
  dirs.add(dir)
  return dir
}

function removeDir(dir) {
  fs.rmSync(dir, { recursive: true, force: true })
  dirs.delete(dir)
}

function onPath(name) {
  return (process.env.PATH ?? '').split(path.delimiter).some((dir) => {
    try {
      fs.accessSync(path.join(dir, name), fs.constants.X_OK)
      return true
    } catch {
      return false
    }
  })
}

function redisServerAvailable() {
  return onPath('redis-server') && onPath('redis-cli')
}

/** The suite fails rather than skips without redis-server: CI installs it, and a skipped suite looks green. */
function assertRedisServer() {
  if (!redisServerAvailable()) throw new Error('redis-server is not installed: apt-get install redis-server')
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

/** `count` distinct free ports: all held open at once, since the system may hand a port just closed out again. */
async function freePorts(count) {
  const servers = await Promise.all(Array.from({ length: count }, () => new Promise((resolve, reject) => {
    const server = net.createServer()
    server.on('error', reject)
    server.listen(0, '127.0.0.1', () => resolve(server))
  })))
  const ports = servers.map((server) => server.address().port)
  await Promise.all(servers.map((server) => new Promise((resolve) => server.close(resolve))))
  return ports
}

/** `start(ports)` on free ports, once more on others when a port was taken in between (by another process). */
async function onFreePorts(count, start) {
  for (let attempt = 1; ; attempt++) {
    try {
      return await start(await freePorts(count))
    } catch (err) {
      if (attempt === 3 || !/Address already in use/.test(err.message)) throw err
    }
  }
}

/** redis-cli's answer (stdout, trimmed), or the failure's text: polling treats both as "not yet". */
function cli(port, args, { password, timeoutMs = 5_000 } = {}) {
  const auth = password === undefined ? [] : ['--no-auth-warning', '-a', password]
  return new Promise((resolve) => {
    execFile('redis-cli', ['-h', '127.0.0.1', '-p', String(port), ...auth, ...args], { timeout: timeoutMs }, (err, stdout, stderr) => {
      resolve({ ok: !err, out: String(stdout).trim(), err: String(stderr).trim() || err?.message })
    })
  })
}

async function until(what, check, output) {
  const deadline = Date.now() + READY_WITHIN_MS
  for (;;) {
    const failure = await check()
    if (failure === null) return
    if (Date.now() > deadline) throw new Error(`${what} within ${READY_WITHIN_MS} ms: ${failure}\n${output()}`)
    await sleep(POLL_MS)
  }
}

/** One redis-server process on `port`, resolved once it answers PING. */
async function spawnServer(port, dir, extraArgs, password) {
  const args = ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no',
    '--enable-debug-command', 'local', '--dir', dir, ...extraArgs]
  if (password !== undefined) args.push('--requirepass', password)
  const child = spawn('redis-server', args, { stdio: ['ignore', 'pipe', 'pipe'] })
  let output = ''
  const collect = (chunk) => { output += chunk }
  child.stdout.setEncoding('utf8').on('data', collect)
  child.stderr.setEncoding('utf8').on('data', collect)
  let exited = null
  child.exited = new Promise((resolve) => child.on('exit', (code, signal) => {
    running.delete(child)
    exited = signal ?? `exit code ${code}`
    resolve()
  }))
  child.on('error', (err) => { exited = err.message })
  running.add(child)
  try {
    await until(`redis-server on port ${port} did not answer PING`, async () => {
      if (exited !== null) throw new Error(`redis-server on port ${port} ended (${exited}) before answering PING:\n${output}`)
      const { out, err } = await cli(port, ['PING'], { password })
      return out === 'PONG' ? null : out || err
    }, () => output)
  } catch (err) {
    child.kill('SIGKILL')
    throw err
  }
  return child
}

/** Only pause or resume the process: the server keeps its connections open and stops or resumes answering. */
const PAUSING = new Set(['SIGSTOP', 'SIGCONT'])

/** Sends `signal`, resolved once the process has ended (at once for SIGSTOP and SIGCONT). */
async function sendSignal(child, signal) {
  if (child.exitCode !== null || child.signalCode !== null) return
  child.kill(signal)
  if (!PAUSING.has(signal)) await child.exited
}

/** A single Redis on a free port; `restart()` brings it back on the same port (after `kill()`, say). */
async function startRedis({ password } = {}) {
  assertRedisServer()
  return onFreePorts(1, async ([port]) => {
    const dir = makeDir('toolgate-redis-')
    let child
    try {
      child = await spawnServer(port, dir, [], password)
    } catch (err) {
      removeDir(dir)
      throw err
    }
    const auth = password === undefined ? '' : `:${encodeURIComponent(password)}@`
    return {
      port,
      url: `redis://${auth}127.0.0.1:${port}`,
      kill: (signal = 'SIGKILL') => sendSignal(child, signal),
      async restart() {
        await sendSignal(child, 'SIGKILL')
        child = await spawnServer(port, dir, [], password)
      },
      async stop() {
        await sendSignal(child, 'SIGKILL')
        removeDir(dir)
      },
    }
  })
}

/** Three masters, no replicas, all slots assigned; resolved once every node says cluster_state:ok. */
async function startCluster() {
  assertRedisServer()
  // The cluster bus listens on port + 10000 unless told otherwise, which may be taken or past 65535.
  return onFreePorts(6, (all) => startNodes(all.slice(0, 3), all.slice(3)))
}

async function startNodes(ports, busPorts) {
  const dir = makeDir('toolgate-redis-cluster-')
  const children = []
  const stop = async () => {
    await Promise.all(children.map((child) => sendSignal(child, 'SIGKILL')))
    removeDir(dir)
  }
  try {
    for (const [i, port] of ports.entries()) {
      children.push(await spawnServer(port, dir, ['--cluster-enabled', 'yes', '--cluster-port', String(busPorts[i]),
        '--cluster-config-file', path.join(dir, `nodes-${port}.conf`)]))
    }
    // Joining waits on the nodes' gossip, which a loaded machine slows down: a wider bound than one command's.
    const created = await cli(ports[0], ['--cluster', 'create', ...ports.map((p) => `127.0.0.1:${p}`), '--cluster-replicas', '0', '--cluster-yes'],
      { timeoutMs: READY_WITHIN_MS * 3 })
    if (!created.ok) throw new Error(`redis-cli --cluster create failed: ${created.err}\n${created.out}`)
    for (const port of ports) {
      await until(`the cluster node on port ${port} did not reach cluster_state:ok`, async () => {
        const { out, err } = await cli(port, ['CLUSTER', 'INFO'])
        return /^cluster_state:ok$/m.test(out) ? null : out.split('\n')[0] || err
      }, () => '')
    }
  } catch (err) {
    await stop()
    throw err
  }
  // kill(port, 'SIGSTOP') pauses one master (its connections stay open, it stops answering); SIGCONT resumes it.
  const kill = (port, signal = 'SIGKILL') => sendSignal(children[ports.indexOf(port)], signal)
  return { ports, nodes: ports.map((port) => ({ host: '127.0.0.1', port })), stop, kill }
}

module.exports = { startRedis, startCluster, redisServerAvailable, assertRedisServer }
