'use strict'
// Renders a realistic sample turn with renderTimeline and screenshots it in headless Chromium, so the page is checked
// the way a person sees it, not only as a string.
// Usage: node scripts/timeline-screenshot.js [--out file.png]   (CHROME_PATH picks the browser binary)

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { spawnSync } = require('node:child_process')
const { renderTimeline } = require('../lib/timeline.js')

const BROWSERS = ['chromium', 'chromium-browser', 'google-chrome']
const PNG_SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])
/** A blank or failed page is a few KB at most; a drawn timeline is well over this. */
const MIN_PNG_BYTES = 10 * 1024
const STARTED_AT = Date.UTC(2025, 0, 15, 9, 30, 0)

const ADMITTED = [['lookup:found', 0.2], ['parse:ok', 0.3], ['validate:ok', 0.5], ['permission:allowed', 0.6]]
const ran = (end, outcome = 'returned') => [[`invoke:${outcome}`, end], [outcome === 'returned' ? 'normalize:text' : 'normalize:error', end + 0.2], ['shape:ok', end + 0.3]]

/** A ToolResult as the executor returns it with tracing on, from its marks with their times and its handler starts. */
function result(callId, name, marks, fields = {}) {
  const { starts = [], attemptErrors, ...rest } = fields
  const end = marks.at(-1)[1]
  return {
    callId, name, success: true, output: '', retryable: false, truncated: false, cached: false,
    attempts: starts.length, latencyMs: starts.length ? Math.round(end - starts[0]) : 0,
    ...rest,
    metadata: {
      startedAt: STARTED_AT,
      ...(starts.length ? { queuedMs: starts[0], starts } : {}),
      stages: marks.map(([mark]) => mark),
      timings: marks.map(([, t]) => t),
      ...(attemptErrors ? { attemptErrors } : {}),
    },
  }
}

/** Ten calls of one agent turn: parallel reads, a write after them, a retry, a rate limit, an approval, a cache hit,
 * a timeout, an async check and a refusal. */
function sampleTurn() {
  const failed = (errorKind, error) => ({ success: false, errorKind, error, output: `Error (${errorKind}): ${error}` })
  return [
    result('toolu_01A', 'read_file', [...ADMITTED, ['cache:miss', 0.8], ...ran(142)], { starts: [1.1] }),
    result('toolu_01B', 'grep', [...ADMITTED, ['cache:miss', 0.9], ...ran(214)], { starts: [1.3] }),
    result('toolu_01C', 'read_file', [...ADMITTED, ['cache:hit', 1.0], ['shape:ok', 1.1]], { cached: true }),
    result('toolu_01D', 'web_fetch', [...ADMITTED, ['cache:miss', 0.9], ...ran(310, 'failed'), ['retry:scheduled', 310.5], ...ran(688)], {
      starts: [1.4, 511], attemptErrors: [{ attempt: 1, errorKind: 'handler_error', error: 'HTTP 503 Service Unavailable', retryInMs: 200 }],
    }),
    result('toolu_01E', 'search_api', [...ADMITTED, ['cache:miss', 0.9], ['rate_limit:waited', 1.0], ...ran(532)], { starts: [402] }),
    result('toolu_01F', 'http_get', [...ADMITTED, ['cache:miss', 1.0], ...ran(1001.5, 'timeout')], {
      starts: [1.5], ...failed('timeout', 'http_get did not finish within 1000 ms; it was stopped.'),
    }),
    result('toolu_01G', 'deploy', [['lookup:found', 0.2], ['parse:ok', 0.3], ['validate:ok', 0.5], ['check:ok', 58], ['permission:allowed', 58.2], ...ran(176)], { starts: [58.5] }),
    result('toolu_01H', 'run_shell', [['lookup:found', 0.2], ['parse:ok', 0.3], ['validate:ok', 0.5], ['permission:asked', 0.7], ['approval:approved', 612], ...ran(745)], { starts: [612.4] }),
    result('toolu_01I', 'write_file', [...ADMITTED, ...ran(338)], { starts: [214.6] }),
    result('toolu_01J', 'delete_file', [['lookup:found', 0.2], ['parse:ok', 0.3], ['validate:invalid_arguments', 0.5]],
      failed('invalid_arguments', 'path: must be a string, got <number>')),
  ]
}

const executable = (file) => {
  try {
    fs.accessSync(file, fs.constants.X_OK)
    return true
  } catch {
    return false
  }
}

/** The browser to use: CHROME_PATH when it names a program, else the first known name on PATH. */
function findBrowser() {
  if (process.env.CHROME_PATH && executable(process.env.CHROME_PATH)) return process.env.CHROME_PATH
  const dirs = (process.env.PATH || '').split(path.delimiter).filter(Boolean)
  return BROWSERS.flatMap((name) => dirs.map((dir) => path.join(dir, name))).find(executable)
}

function main() {
  const args = process.argv.slice(2)
  const outAt = args.indexOf('--out')
  if (outAt !== -1 && !args[outAt + 1]) {
    console.error('Usage: node scripts/timeline-screenshot.js [--out file.png]')
    process.exit(1)
  }
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'toolgate-timeline-'))
  const html = path.join(dir, 'timeline-sample.html')
  const png = path.resolve(outAt === -1 ? path.join(dir, 'timeline.png') : args[outAt + 1])
  fs.writeFileSync(html, renderTimeline(sampleTurn(), { title: 'toolgate turn — sample' }))

  const browser = findBrowser()
  if (!browser) {
    console.error(`No Chromium found (tried ${BROWSERS.join(', ')} on PATH, and CHROME_PATH).`)
    console.error('Install one, e.g. `apt-get install -y chromium`, or set CHROME_PATH to a Chrome/Chromium binary.')
    console.error(`The page alone was written to ${html}`)
    process.exit(2)
  }
  fs.mkdirSync(path.dirname(png), { recursive: true })
  // A screenshot left from an earlier run must not pass for this one.
  fs.rmSync(png, { force: true })
  const run = spawnSync(browser, [
    '--headless=new', '--no-sandbox', '--disable-gpu', '--hide-scrollbars', '--window-size=1100,520',
    `--screenshot=${png}`, `file://${html}`,
  ], { encoding: 'utf8', timeout: 120_000 })
  if (run.error) throw run.error

  const bytes = fs.existsSync(png) ? fs.readFileSync(png) : null
  if (!bytes) throw new Error(`${browser} wrote no screenshot (exit ${run.status}):\n${run.stderr}`)
  if (!bytes.subarray(0, 8).equals(PNG_SIGNATURE)) throw new Error(`${png} is not a PNG`)
  if (bytes.length <= MIN_PNG_BYTES) throw new Error(`${png} is only ${bytes.length} bytes: the page looks blank`)
  console.log(png)
}

// Run as a script; required (by the tests), it only lends its result builder.
if (require.main === module) main()

module.exports = { result }
