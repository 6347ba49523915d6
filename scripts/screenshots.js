'use strict'
// The devtools guide's screenshots (docs/devtools/*.png): a gate runs a few turns that meet most stations, a page
// is opened on it in headless Chromium, and each view is taken. `node scripts/screenshots.js`; the suite checks the
// committed ones are not blank.

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { ToolExecutor } = require('..')
const { devtools } = require('../lib/devtools')
const { launch } = require('../__test__/browser/chromium.js')

const OUT = path.join(__dirname, '..', 'docs', 'devtools')
const sleep = (ms, value) => new Promise((resolve) => setTimeout(resolve, ms, value))

function tools() {
  let flaky = 0
  return [
    { name: 'get_weather', readOnly: true, parameters: { type: 'object', properties: { city: { type: 'string' }, days: { type: 'integer' } }, required: ['city'] }, handler: ({ city }) => sleep(60, `Sunny in ${city}, 21 °C`) },
    { name: 'search_docs', readOnly: true, idempotent: true, cache: { ttlMs: 60_000 }, rateLimit: { limit: '20/min', key: 'userId' }, parameters: { type: 'object', properties: { q: { type: 'string' } } }, handler: ({ q }) => sleep(90, `3 pages match "${q}"`) },
    {
      name: 'flaky_api', readOnly: true, retry: { maxRetries: 2, initialDelayMs: 80 }, breaker: { minCalls: 4 }, parameters: { type: 'object', properties: {} },
      handler: () => sleep(30).then(() => {
        flaky += 1
        if (flaky % 2 === 1) throw Object.assign(new Error('503 Service Unavailable'), { retryable: true })
        return 'ok after a retry'
      }),
    },
    { name: 'send_mail', parameters: { type: 'object', properties: { to: { type: 'string' } } }, handler: ({ to }) => sleep(20, `sent to ${to}`) },
    { name: 'deploy', needsApproval: true, parameters: { type: 'object', properties: { env: { type: 'string' } } }, handler: ({ env }) => sleep(50, `deployed to ${env}`) },
    { name: 'long_report', readOnly: true, timeoutMs: 60_000, parameters: { type: 'object', properties: {} }, handler: () => new Promise(() => {}) },
  ]
}

async function main() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'toolgate-shots-'))
  const recordingFile = path.join(dir, 'turns.jsonl')
  // Yesterday's traffic, recorded before send_mail was denied.
  const yesterday = new ToolExecutor({ record: { to: recordingFile } })
  for (const tool of tools()) yesterday.register(tool)
  await yesterday.execute([{ name: 'get_weather', arguments: { city: 'Lisbon' } }, { name: 'send_mail', arguments: { to: 'ops@example.com' } }])
  await yesterday.close()

  const gate = new ToolExecutor({
    permissions: { deny: [{ tool: 'send_mail', reason: 'mail is paused during the migration' }], allow: [{ tool: 'get_weather', args: { city: 'P*' } }] },
    approvalTimeoutMs: 120_000,
    budget: { maxCalls: 100, by: 'userId' },
  })
  for (const tool of tools()) gate.register(tool)
  const dt = await devtools(gate, { approvals: true })
  const browser = await launch()
  try {
    const page = await browser.newPage({ viewport: { width: 1280, height: 760 } })
    await page.goto(dt.url)
    await page.waitForSelector('#link.live')
    await gate.execute([
      { id: 'call_1', name: 'get_weather', arguments: '{"city": "Paris", "days": "3",}' },
      { id: 'call_2', name: 'search_docs', arguments: { q: 'rate limits' } },
      { id: 'call_3', name: 'flaky_api', arguments: {} },
    ], { context: { userId: 'ann' } })
    await gate.execute([
      { id: 'call_4', name: 'search_docs', arguments: { q: 'rate limits' } },
      { id: 'call_5', name: 'send_mail', arguments: { to: 'team@example.com' } },
      { id: 'call_6', name: 'get_wether', arguments: { city: 'Oslo' } },
    ], { context: { userId: 'bo' } })
    const open = gate.turn()
    open.add({ id: 'call_7', name: 'long_report', arguments: {} })
    open.add({ id: 'call_8', name: 'deploy', arguments: { env: 'production' } })
    await sleep(1200)
    fs.mkdirSync(OUT, { recursive: true })
    await page.screenshot({ path: path.join(OUT, 'turns.png') })
    await page.click('[data-turn]:last-child .row[data-index="0"]')
    await page.waitForSelector('#story [data-repair]')
    await page.screenshot({ path: path.join(OUT, 'story.png') })
    await page.click('#story-close')
    await page.click('nav button[data-view="approvals"]')
    await page.waitForSelector('[data-approval]')
    await page.screenshot({ path: path.join(OUT, 'approvals.png') })
    await page.click('nav button[data-view="health"]')
    await page.waitForSelector('[data-status]')
    await page.screenshot({ path: path.join(OUT, 'health.png'), fullPage: true })
    await page.click('nav button[data-view="replay"]')
    await page.setInputFiles('#replay-file', recordingFile)
    await page.waitForSelector('[data-changed]')
    await page.screenshot({ path: path.join(OUT, 'replay.png') })
    open.cancel('screenshots taken')
    await open.results
  } finally {
    await browser.close()
    await dt.close()
    await gate.close({ timeoutMs: 100 })
    fs.rmSync(dir, { recursive: true, force: true })
  }
  for (const file of fs.readdirSync(OUT)) console.log(`screenshots: ${path.join('docs', 'devtools', file)} ${fs.statSync(path.join(OUT, file)).size} bytes`)
}

main().catch((err) => {
  console.error(err)
  process.exit(1)
})
