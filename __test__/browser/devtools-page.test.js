'use strict'
// The devtools page in headless Chromium (Debian's, driven by playwright-core): it loads with its token and refuses
// without it, shows turns live with each call's tool and outcome, tells a call's story, unblocks a call when an
// approval is clicked, replays a recording, stays bounded; and the guide's screenshots are not blank. Run once, not
// under each Node release: what it tests is the page.

const { describe, it, before, after } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { ToolExecutor } = require('../..')
const { devtools } = require('../../lib/devtools')
const { launch, coloursIn } = require('./chromium.js')
const { never, weatherGate } = require('../helpers.js')

describe('devtools page in Chromium', () => {
  let browser
  before(async () => { browser = await launch() })
  after(() => browser?.close())

  async function open(dt) {
    const page = await browser.newPage({ viewport: { width: 1280, height: 800 } })
    const errors = []
    page.on('pageerror', (err) => errors.push(err))
    page.on('console', (message) => { if (message.type() === 'error') errors.push(new Error(message.text())) })
    await page.goto(dt.url)
    await page.waitForSelector('#link.live', { timeout: 5000 })
    return { page, errors }
  }

  it('loads with its token and refuses without it', async (t) => {
    const dt = await devtools(weatherGate())
    t.after(() => dt.close())
    const page = await browser.newPage()
    t.after(() => page.close())
    const refused = await page.goto(dt.url.replace(/\?token=.*/, ''))
    assert.equal(refused.status(), 401)
    assert.match(await page.textContent('body'), /needs its token/)
    const loaded = await page.goto(dt.url)
    assert.equal(loaded.status(), 200)
    await page.waitForSelector('#link.live', { timeout: 5000 })
    assert.equal(await page.title(), 'toolgate devtools')
  })

  it('shows a turn run after it opened within a second, each call with its tool and outcome, and a call\'s story', async (t) => {
    const gate = weatherGate({ permissions: { allow: [{ tool: 'get_weather', args: { city: 'P*' } }] } })
    const dt = await devtools(gate)
    t.after(() => dt.close())
    const { page, errors } = await open(dt)
    t.after(() => page.close())
    await gate.execute([
      { id: 'w1', name: 'get_weather', arguments: '{"city": "Paris", "days": "3",}' },
      { id: 'w2', name: 'get_wether', arguments: { city: 'Oslo' } },
    ])
    await page.waitForSelector('[data-turn] .row [data-outcome="unknown_tool"]', { timeout: 1000 })
    const rows = await page.$$eval('[data-turn] .row', (list) => list.map((row) => [row.querySelector('.name').textContent, row.querySelector('.outcome').textContent]))
    assert.deepEqual(rows, [['0. get_weather', 'ok'], ['1. get_wether', 'unknown_tool']])
    await page.click('[data-turn] .row[data-index="0"]')
    await page.waitForSelector('#story [data-repair]')
    const repairs = await page.$$eval('#story [data-repair]', (list) => list.map((li) => li.dataset.repair))
    assert.deepEqual(repairs, ['json-trailing-commas', 'string-to-integer'])
    assert.match(await page.textContent('#story [data-rule]'), /get_weather/, 'the rule that allowed it')
    const story = await page.textContent('#story')
    assert.match(story, /sunny in Paris/, 'the output the model read')
    assert.match(story, /"days": 3/, 'the arguments as the handler received them')
    assert.deepEqual(errors, [])
  })

  it('a hung handler is shown running, and is listed among the longest', async (t) => {
    const gate = new ToolExecutor({ defaultTimeoutMs: 60_000 })
    gate.register({ name: 'stuck', readOnly: true, handler: () => never() })
    const dt = await devtools(gate)
    t.after(() => dt.close())
    const { page } = await open(dt)
    t.after(() => page.close())
    const turn = gate.turn()
    turn.add({ name: 'stuck' })
    await page.waitForSelector('[data-turn] .row [data-outcome^="running"]', { timeout: 2000 })
    assert.match(await page.textContent('#inflight'), /1 running\. Longest: stuck/)
    assert.ok(await page.$('.seg.running-now'), 'drawn as running now')
    turn.cancel('done')
    await page.waitForSelector('[data-turn] .row [data-outcome="cancelled"]', { timeout: 2000 })
  })

  it('a burst larger than the page can follow: the page starts over and shows the turn, bounded', async (t) => {
    const gate = new ToolExecutor({ concurrency: 64 })
    gate.register({ name: 'inc', readOnly: true, handler: ({ n }) => n + 1 })
    const dt = await devtools(gate)
    t.after(() => dt.close())
    const { page, errors } = await open(dt)
    t.after(() => page.close())
    await gate.execute(Array.from({ length: 3_000 }, (_, n) => ({ name: 'inc', arguments: { n } })))
    await page.waitForFunction(() => [...document.querySelectorAll('[data-turn] .more')].some((more) => more.textContent === '2500 more calls not kept'), undefined, { timeout: 5000 })
    assert.equal(await page.$$eval('[data-turn] .row', (rows) => rows.length), 200, 'the calls drawn of one turn')
    assert.deepEqual(errors, [])
  })

  it('the page keeps no more turns than the server does', async (t) => {
    const gate = weatherGate()
    const dt = await devtools(gate, { keepTurns: 3 })
    t.after(() => dt.close())
    const { page } = await open(dt)
    t.after(() => page.close())
    for (let i = 0; i < 10; i++) await gate.execute([{ name: 'get_weather', arguments: { city: `c${i}` } }])
    await page.waitForFunction(() => document.querySelector('[data-turn] .row [data-outcome="ok"]') && [...document.querySelectorAll('[data-turn]')].length === 3, undefined, { timeout: 5000 })
    await new Promise((resolve) => setTimeout(resolve, 300))
    assert.equal(await page.$$eval('[data-turn]', (turns) => turns.length), 3)
  })

  it('an approval clicked in the page unblocks the call', async (t) => {
    const gate = new ToolExecutor()
    gate.register({ name: 'deploy', needsApproval: true, handler: ({ env }) => `deployed to ${env}` })
    const dt = await devtools(gate, { approvals: true })
    t.after(() => dt.close())
    const { page, errors } = await open(dt)
    t.after(() => page.close())
    let settled = false
    const pending = gate.execute([{ name: 'deploy', arguments: { env: 'staging' } }]).finally(() => { settled = true })
    await page.waitForSelector('#approval-count:not([hidden])')
    await page.click('nav button[data-view="approvals"]')
    await page.waitForSelector('[data-approval] button.approve')
    assert.equal(settled, false, 'the call waits')
    await page.click('[data-approval] button.approve')
    const [result] = await pending
    assert.equal(result.output, 'deployed to staging')
    await page.waitForSelector('#approval-count[hidden]', { state: 'attached' })
    assert.deepEqual(errors, [])
  })

  it('replays a recording against the attached gate and shows what changed', async (t) => {
    const entries = []
    const recorded = new ToolExecutor({ record: { to: (entry) => entries.push(entry) } })
    const tool = { name: 'send_mail', handler: ({ to }) => `sent to ${to}` }
    recorded.register(tool)
    await recorded.execute([{ name: 'send_mail', arguments: { to: 'ann@example.com' } }])
    for (let i = 0; i < 100 && entries.length === 0; i++) await new Promise((resolve) => setTimeout(resolve, 10))
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'toolgate-devtools-'))
    t.after(() => fs.rmSync(dir, { recursive: true, force: true }))
    const file = path.join(dir, 'turns.jsonl')
    fs.writeFileSync(file, entries.map((e) => JSON.stringify(e)).join('\n'))

    const stricter = new ToolExecutor({ permissions: { deny: [{ tool: 'send_mail', reason: 'mail is off today' }] } })
    stricter.register(tool)
    const dt = await devtools(stricter)
    t.after(() => dt.close())
    const { page, errors } = await open(dt)
    t.after(() => page.close())
    await page.click('nav button[data-view="replay"]')
    await page.setInputFiles('#replay-file', file)
    await page.waitForSelector('[data-changed]', { timeout: 10_000 })
    assert.equal(await page.getAttribute('[data-changed]', 'data-changed'), '1')
    const change = await page.textContent('#replay-body')
    assert.match(change, /send_mail .*: success/)
    assert.match(change, /mail is off today/)
    assert.equal(stricter.stats().total.calls, 0, 'the attached gate itself ran nothing')
    assert.deepEqual(errors, [])
  })

  it('the screenshots in the guide are not blank', async () => {
    const page = await browser.newPage()
    const dir = path.join(__dirname, '..', '..', 'docs', 'devtools')
    const shots = fs.readdirSync(dir).filter((f) => f.endsWith('.png'))
    assert.deepEqual(shots.sort(), ['approvals.png', 'health.png', 'replay.png', 'story.png', 'turns.png'])
    for (const shot of shots) {
      const colours = await coloursIn(page, fs.readFileSync(path.join(dir, shot)))
      assert.ok(colours >= 8, `${shot} shows ${colours} colours`)
    }
    await page.close()
  })
})
