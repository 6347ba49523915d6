'use strict'
// The permission station's precedence as a tested guarantee: every cell of rule kind × mode × approval answer,
// approvals that throw, hang or edit, session memory, risk ceilings, business checks, and messages that do not leak.

const { describe, it } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { ToolExecutor } = require('..')
const { gateWith, assertFailure, assertSuccess, marks, sleep, never, deferred, recorder } = require('./helpers')

const SHELL = { type: 'object', properties: { command: { type: 'string', minLength: 1 } }, required: ['command'] }

/** What the approval callback does, per column of the table. */
const ANSWERS = {
  approve: () => true,
  deny: () => ({ decision: 'deny', reason: 'not today' }),
  edit: () => ({ decision: 'approve', arguments: { command: 'ls -la' } }),
  'edit invalid': () => ({ decision: 'approve', arguments: { command: '' } }),
  throws: () => { throw new Error('approver crashed') },
  hangs: () => never(),
  'no callback': null,
}
const RULES = {
  deny: { deny: [{ tool: 'shell', args: { command: 'rm *' } }] },
  ask: { ask: [{ tool: 'shell', args: { command: 'rm *' } }] },
  allow: { allow: [{ tool: 'shell', args: { command: 'rm *' } }] },
  none: {},
}
const MODES = [undefined, 'default', 'acceptAll', 'readOnly', 'denyAll']

/** The documented table (README, "Permissions"): what a call to the write tool `shell` with `rm -rf build` gets. */
function expected(rule, mode, answer) {
  // Edited arguments are decided again (deny rules, the mode), as a call sent with them would be: `ls -la`
  // matches no rule, so readOnly and denyAll refuse it.
  const edited = mode === 'readOnly' || mode === 'denyAll' ? 'permission_denied' : 'runs edited'
  const asked = () => ({
    approve: 'runs',
    deny: 'approval_denied',
    edit: edited,
    'edit invalid': 'invalid_arguments',
    throws: 'approval_denied',
    hangs: 'approval_denied',
    'no callback': 'approval_denied',
  })[answer]
  if (rule === 'deny') return 'permission_denied'
  if (rule === 'ask') return mode === 'acceptAll' ? 'runs' : asked()
  if (rule === 'allow') return 'runs'
  switch (mode) {
    case undefined: case 'acceptAll': return 'runs'
    case 'default': return asked()
    case 'readOnly': case 'denyAll': return 'permission_denied'
  }
}

async function cell(rule, mode, answer) {
  const ran = []
  const approve = ANSWERS[answer]
  const approvals = []
  const gate = new ToolExecutor({
    permissions: { ...RULES[rule], ...(mode ? { mode } : {}) },
    approvalTimeoutMs: 50,
    ...(approve ? { approve: (request) => { approvals.push(request); return approve(request) } } : {}),
  })
  gate.register({ name: 'shell', parameters: SHELL, handler: ({ command }) => { ran.push(command); return `ran ${command}` } })
  const [r] = await gate.execute([{ id: 'c1', name: 'shell', input: { command: 'rm -rf build' } }])
  const outcome = r.success ? (ran[0] === 'ls -la' ? 'runs edited' : 'runs') : r.errorKind
  return { outcome, r, ran, approvals }
}

describe('precedence: rule kind × mode × approval answer', () => {
  for (const rule of Object.keys(RULES)) {
    for (const mode of MODES) {
      it(`${rule} rule, mode ${mode ?? '(none)'}`, async () => {
        for (const answer of Object.keys(ANSWERS)) {
          const { outcome, r, ran, approvals } = await cell(rule, mode, answer)
          const want = expected(rule, mode, answer)
          assert.equal(outcome, want, `${rule} × ${mode} × ${answer}: ${r.error ?? r.output}`)
          if (!want.startsWith('runs')) assert.deepEqual(ran, [], 'a refused call never reaches its handler')
          const shouldAsk = (rule === 'ask' && mode !== 'acceptAll') || (rule === 'none' && mode === 'default')
          assert.equal(marks(r).includes('permission:asked'), shouldAsk, `${rule} × ${mode}: asks`)
          assert.equal(approvals.length, shouldAsk && answer !== 'no callback' ? 1 : 0, 'the callback is called exactly when the station asks')
          const decidedBySomething = rule !== 'none' || mode !== undefined
          assert.equal(Boolean(r.metadata.permission?.by), decidedBySomething, `the result names what decided: ${JSON.stringify(r.metadata)}`)
        }
      })
    }
  }

  it('names the rule, the mode or the answer that decided', async () => {
    const denied = (await cell('deny', 'acceptAll', 'approve')).r
    assertFailure(denied, 'permission_denied', 'refused by the rule deny shell(command: rm *) (executor permissions)')
    assert.deepEqual(denied.metadata.permission, { decision: 'denied', by: 'refused by the rule deny shell(command: rm *) (executor permissions)' })
    const approved = (await cell('ask', 'default', 'approve')).r
    assert.deepEqual(approved.metadata.permission, { decision: 'approved', by: 'ask shell(command: rm *) (executor permissions); approved by the approval callback' })
    assert.deepEqual(marks(approved).slice(2, 5), ['validate:ok', 'permission:asked', 'approval:approved'])
    const hung = (await cell('none', 'default', 'hangs')).r
    assertFailure(hung, 'approval_denied', 'no approval came within 50 ms')
    const threw = (await cell('ask', undefined, 'throws')).r
    assertFailure(threw, 'approval_denied', 'the approval callback failed (approver crashed)')
    const invalid = (await cell('ask', undefined, 'edit invalid')).r
    assertFailure(invalid, 'invalid_arguments', 'The arguments as edited at approval were refused', '/command: must be at least 1 character long')
    const readOnly = (await cell('none', 'readOnly', 'approve')).r
    assertFailure(readOnly, 'permission_denied', "refused by the mode readOnly (the tool's risk is write)")
  })

  it('says a deny rule\'s reason, with argument patterns or without', async () => {
    const { gate } = gateWith([{ name: 'shell' }])
    const deny = [{ tool: 'shell', reason: 'no shells on Fridays' }, { tool: 'shell', args: { command: 'rm *' }, reason: 'no deletions' }]
    for (const [i, rule] of deny.entries()) {
      const [r] = await gate.execute([{ id: 'a', name: 'shell', input: { command: 'rm -rf /' } }], { context: { permissions: { deny: [rule] } } })
      assertFailure(r, 'permission_denied', `(context permissions) (${rule.reason}).`)
      assert.ok(i === 1 || r.error.includes('refused by the rule deny shell (context permissions)'), r.error)
    }
  })
})

describe('approvals', () => {
  it('gives the callback the call, its arguments, the rule and its reason, and the context', async () => {
    const requests = []
    const gate = new ToolExecutor({
      permissions: { ask: [{ tool: 'shell', args: { command: 'git push*' }, reason: 'pushes are public' }] },
      approve: (request) => { requests.push(request); return 'approve' },
    })
    gate.register({ name: 'shell', parameters: SHELL, handler: () => 'pushed' })
    const context = { sessionId: 's', userId: 'ada' }
    const [r] = await gate.execute([{ id: 'c9', name: 'shell', input: { command: 'git push origin main' } }], { context })
    assertSuccess(r, 'pushed')
    assert.deepEqual(requests, [{
      callId: 'c9', toolName: 'shell', arguments: { command: 'git push origin main' },
      rule: 'ask shell(command: git push*) (executor permissions)', reason: 'pushes are public', context,
    }])
  })

  it("lets one turn's own approve decide its asks in place of the executor's", async () => {
    const asked = []
    const gate = new ToolExecutor({ approve: ({ callId }) => { asked.push(`executor ${callId}`); return 'deny' } })
    gate.register({ name: 'deploy', needsApproval: true, handler: () => 'deployed' })
    const [own] = await gate.execute([{ id: 'a', name: 'deploy' }], { approve: ({ callId }) => { asked.push(`turn ${callId}`); return 'approve' } })
    assertSuccess(own, 'deployed')
    const [fallback] = await gate.execute([{ id: 'b', name: 'deploy' }])
    assertFailure(fallback, 'approval_denied')
    assert.deepEqual(asked, ['turn a', 'executor b'])
    await assert.rejects(gate.execute([{ name: 'deploy' }], { approve: 'yes' }), /approve must be a function/)
  })

  it('remembers "approve for this session" for that session only', async () => {
    let asked = 0
    const gate = new ToolExecutor({ permissions: { mode: 'default' }, dedup: { policy: 'off' }, approve: () => { asked++; return { decision: 'approve', remember: 'session' } } })
    gate.register({ name: 'write', handler: () => 'ok' })
    for (const sessionId of ['a', 'a', 'a', 'b']) {
      const [r] = await gate.execute([{ name: 'write' }], { context: { sessionId } })
      assertSuccess(r, 'ok')
    }
    assert.equal(asked, 2, 'once for session a, once for session b')
    const [again] = await gate.execute([{ name: 'write' }], { context: { sessionId: 'a' } })
    assert.match(again.metadata.permission.by, /approved earlier in this session/)
  })

  it('lets calls that need no approval run while another waits for one, as the scheduler allows', async () => {
    const rec = recorder()
    const answer = deferred()
    const gate = new ToolExecutor({ permissions: { ask: ['secret_read'] }, approve: () => answer.promise })
    const ID = { type: 'object', properties: { id: { type: 'string' } } }
    gate.register({ name: 'secret_read', readOnly: true, parameters: ID, handler: rec.handler(5) })
    gate.register({ name: 'read', readOnly: true, parameters: ID, handler: rec.handler(5) })
    gate.register({ name: 'write', parameters: ID, handler: rec.handler(5) })
    const turn = gate.execute([
      { name: 'secret_read', input: { id: 's' } },
      { name: 'read', input: { id: 'r1' } },
      { name: 'write', input: { id: 'w' } },
    ])
    await sleep(40)
    assert.deepEqual(rec.events, ['start:r1', 'end:r1'], 'the read beside it ran; the write after it waits for the batch')
    answer.resolve(true)
    const results = await turn
    assert.deepEqual(results.map((r) => r.errorKind ?? 'ok'), ['ok', 'ok', 'ok'])
    assert.ok(rec.index('end:s') < rec.index('start:w'), 'the write still runs after the batch before it')
  })

  it('cancels a call waiting for approval with its turn, and ignores the late answer', async () => {
    const answer = deferred()
    const controller = new AbortController()
    const { gate, calls } = gateWith([{ name: 'deploy', needsApproval: true }], { approve: () => answer.promise })
    const turn = gate.execute([{ name: 'deploy' }], { signal: controller.signal })
    await sleep(5)
    controller.abort()
    const [r] = await turn
    assertFailure(r, 'cancelled')
    answer.resolve(true)
    await sleep(5)
    assert.equal(calls.deploy, 0)
  })

  it('holds edited arguments to the deny rules and the checks the original met', async () => {
    const ran = []
    const gate = new ToolExecutor({
      permissions: { deny: [{ tool: 'shell', args: { command: 'rm *' } }], ask: ['shell'] },
      approve: () => ({ decision: 'approve', arguments: { command: 'rm -rf /data' } }),
    })
    gate.register({ name: 'shell', parameters: SHELL, handler: ({ command }) => { ran.push(command); return 'ran' } })
    const [r] = await gate.execute([{ name: 'shell', input: { command: 'ls' } }])
    assertFailure(r, 'permission_denied', 'The arguments as edited at approval were refused', 'deny shell(command: rm *)')
    assert.deepEqual(ran, [])
  })

  it('remembers nothing "for this session" when the context names no session', async () => {
    let asked = 0
    const gate = new ToolExecutor({ permissions: { mode: 'default' }, approve: () => { asked++; return { decision: 'approve', remember: 'session' } } })
    gate.register({ name: 'write', handler: () => 'ok' })
    await gate.execute([{ name: 'write' }], { context: { userId: 'alice' } })
    await gate.execute([{ name: 'write' }], { context: { userId: 'mallory' } })
    assert.equal(asked, 2, 'without a sessionId, one user\'s approval is not another\'s')
  })

  it('settles a call still waiting on the host when stopOnError ends the turn, and ignores its late answer', async () => {
    const gate = new ToolExecutor({ approve: () => false })
    gate.register({ name: 'slow', readOnly: true, handler: () => sleep(60, 'slow done') })
    gate.register({ name: 'w', needsApproval: true, handler: () => 'w' })
    gate.register({ name: 'r', readOnly: true, check: () => sleep(20, 'not today'), handler: () => 'r' })
    const results = await gate.execute([{ name: 'slow' }, { name: 'w' }, { name: 'r' }], { stopOnError: true })
    assert.deepEqual(results.map((x) => x.errorKind ?? 'ok'), ['ok', 'approval_denied', 'not_executed'])
    await sleep(40)
    assert.equal(gate.running, 0)
  })

  it('redacts what the host says before the model reads it', async () => {
    const token = 'ghp_R8mQ2vX7kL4pN9wT3zJ6yH1sD5fG0aB2cE4u'
    const gate = new ToolExecutor({ approve: () => ({ decision: 'deny', reason: `token ${token} is revoked` }) })
    gate.register({ name: 'a', check: () => { throw new Error(`upstream 401 for ${token}`) }, handler: () => 'x' })
    gate.register({ name: 'b', needsApproval: true, handler: () => 'x' })
    const results = await gate.execute([{ name: 'a' }, { name: 'b' }])
    for (const r of results) {
      assert.ok(!JSON.stringify(r).includes(token), JSON.stringify(r))
      assert.match(r.error, /\[REDACTED:github-token\]/)
    }
  })

  it('re-validates edited arguments and runs the call with them', async () => {
    const got = []
    const gate = new ToolExecutor({ permissions: { ask: ['shell'] }, approve: () => ({ decision: 'approve', arguments: { command: 'rm -ri build' } }) })
    gate.register({ name: 'shell', parameters: SHELL, handler: ({ command }) => { got.push(command); return 'ok' } })
    const [r] = await gate.execute([{ name: 'shell', input: { command: 'rm -rf build' } }])
    assertSuccess(r, 'ok')
    assert.deepEqual(got, ['rm -ri build'])
    assert.ok(marks(r).includes('approval:edited'))
  })
})

describe('rules and risk', () => {
  it('deny always wins: over allow rules, acceptAll, approvedTools and the context', async () => {
    const gate = new ToolExecutor({ permissions: { deny: [{ tool: 'shell', args: { command: 'rm *' } }], allow: ['shell'], mode: 'acceptAll' }, approve: () => true })
    gate.register({ name: 'shell', parameters: SHELL, handler: () => 'ran' })
    const context = { approvedTools: ['shell'], permissions: { allow: ['*'], mode: 'acceptAll' } }
    const commands = ['rm -rf /', '  rm   -rf /', 'rm\t-rf /', 'ls']
    const results = await gate.execute(commands.map((command) => ({ name: 'shell', input: { command } })), { context })
    assert.deepEqual(results.map((r) => r.errorKind ?? 'ok'), ['permission_denied', 'permission_denied', 'permission_denied', 'ok'])
    const ctxDeny = await gate.execute([{ name: 'shell', input: { command: 'ls' } }], { context: { permissions: { deny: ['sh*'] } } })
    assertFailure(ctxDeny[0], 'unknown_tool', 'There is no tool named "shell"')
    assert.match(ctxDeny[0].metadata.permission.by, /deny sh\* \(context permissions\)/)
  })

  it('hides tools above the context maxRisk from lists, definitions, suggestions and errors', async () => {
    const gate = new ToolExecutor()
    gate.register({ name: 'read_db', readOnly: true, handler: () => 'rows' })
    gate.register({ name: 'write_db', handler: () => 'ok' })
    gate.register({ name: 'drop_db', risk: 'destructive', handler: () => 'dropped' })
    gate.register({ name: 'grant_role', risk: 'admin', handler: () => 'granted' })
    const context = { maxRisk: 'write' }
    assert.deepEqual(gate.list({ context }).map((t) => [t.name, t.risk]), [['read_db', 'read'], ['write_db', 'write']])
    assert.deepEqual(gate.definitions('anthropic', { context }).map((d) => d.name), ['read_db', 'write_db'])
    const [drop, typo] = await gate.execute([{ name: 'drop_db' }, { name: 'drop-db' }], { context })
    // Answered as a name that does not exist, as the near miss is: nothing tells the model it is there.
    assertFailure(drop, 'unknown_tool', 'There is no tool named "drop_db". Available tools: read_db, write_db.')
    assert.equal(drop.metadata.permission.by, "refused by the context's maxRisk (write; the tool's risk is destructive)")
    assertFailure(typo, 'unknown_tool')
    assert.ok(!typo.error.includes('drop_db') && !typo.error.includes('grant_role'), typo.error)
    const hiddenByRule = new ToolExecutor({ permissions: { deny: ['grant_*'] }, repair: { toolNames: true } })
    hiddenByRule.register({ name: 'grant_role', handler: () => 'x' })
    hiddenByRule.register({ name: 'read_db', readOnly: true, handler: () => 'x' })
    const [corrected] = await hiddenByRule.execute([{ name: 'Grant-Role' }])
    assertFailure(corrected, 'unknown_tool')
    assert.ok(!corrected.error.includes('grant_role'), 'never named, never auto-corrected to')
  })

  it('refuses unreadable rules and contexts as programmer errors', async () => {
    assert.throws(() => new ToolExecutor({ permissions: { mode: 'yolo' } }), TypeError)
    assert.throws(() => new ToolExecutor({ permissions: { deny: [{ args: {} }] } }), TypeError)
    assert.throws(() => new ToolExecutor().register({ name: 't', risk: 'huge', handler: () => 1 }), TypeError)
    const gate = new ToolExecutor()
    gate.register({ name: 't', handler: () => 1 })
    await assert.rejects(gate.execute([{ name: 't' }], { context: { permissions: { mode: 'yolo' } } }), TypeError)
  })
})

describe('business checks', () => {
  const root = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'toolgate-root-')))
  fs.mkdirSync(path.join(root, 'docs'))
  const outside = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'toolgate-out-')))
  fs.symlinkSync(outside, path.join(root, 'link'))
  fs.mkdirSync(path.join(outside, 'deep'))
  fs.symlinkSync(path.join(outside, 'deep'), path.join(root, 'sub')) // sub/.. is `outside`, not the root
  fs.symlinkSync(path.join(outside, 'created-by-a-write'), path.join(root, 'dangling'))

  it('pathWithin refuses traversal, absolute paths outside, symlinks out and odd encodings', async () => {
    const { gate, calls } = gateWith([{ name: 'read', readOnly: true, parameters: { type: 'object', properties: { path: { type: 'string' } } }, pathWithin: { arg: 'path', root } }])
    const inside = ['docs/a.md', './docs/../docs/b.md', `${root}/docs/c.md`, 'new/file.txt', '%2e%2e/passwd', '．．/passwd', 'docs\\..\\..\\x']
    const outsidePaths = ['../etc/passwd', 'docs/../../x', '/etc/passwd', 'link/secret', `${root}/../x`, 'a\u0000b', 'sub/../secret.txt', 'dangling']
    const results = await gate.execute([...inside, ...outsidePaths].map((p) => ({ name: 'read', input: { path: p } })))
    results.slice(0, inside.length).forEach((r, i) => assertSuccess(r, 'ok', inside[i]))
    results.slice(inside.length).forEach((r, i) => {
      assertFailure(r, 'invalid_arguments', 'the path in "path"')
      assert.equal(marks(r).at(-1), 'check:invalid_arguments', outsidePaths[i])
    })
    assert.equal(calls.read, inside.length)
    assert.throws(() => gate.register({ name: 'x', pathWithin: { arg: 'p', root: '/no/such/root' }, handler: () => 1 }), /cannot be resolved/)
  })

  it('urlHosts refuses hosts off the list however the URL dresses them', async () => {
    const { gate } = gateWith([{ name: 'fetch', readOnly: true, parameters: { type: 'object', properties: { url: { type: 'string' } } }, urlHosts: { arg: 'url', hosts: ['example.com', '*.docs.rs'] } }])
    const ok = ['https://example.com/a', 'https://EXAMPLE.com:8443/', 'https://serde.docs.rs/x']
    const bad = ['https://example.com@evil.com/', 'https://example.com.evil.com/', 'https://evil.com/?example.com', 'file:///etc/passwd', 'not a url', 'https://docs.rs/']
    const results = await gate.execute([...ok, ...bad].map((url) => ({ name: 'fetch', input: { url } })))
    results.slice(0, ok.length).forEach((r) => assertSuccess(r, 'ok'))
    results.slice(ok.length).forEach((r) => assertFailure(r, 'invalid_arguments', 'the URL in "url"'))
  })

  it('runs a tool\'s own async check before permission, and fails closed when it throws or hangs', async () => {
    const approvals = []
    const gate = new ToolExecutor({ permissions: { ask: ['transfer'] }, approve: (r) => { approvals.push(r.callId); return true }, checkTimeoutMs: 50 })
    const seen = []
    gate.register({
      name: 'transfer',
      parameters: { type: 'object', properties: { amount: { type: 'number' } } },
      check: async ({ amount }, ctx) => {
        seen.push(ctx.callId)
        if (amount === 13) throw new Error('ledger offline')
        if (amount === 99) return never()
        return amount > 100 ? `the amount ${amount} is over the daily limit of 100` : undefined
      },
      handler: ({ amount }) => `sent ${amount}`,
    })
    const results = await gate.execute([50, 500, 13, 99].map((amount, i) => ({ id: `t${i}`, name: 'transfer', input: { amount } })))
    assertSuccess(results[0], 'sent 50')
    assertFailure(results[1], 'invalid_arguments', 'the amount 500 is over the daily limit of 100')
    assertFailure(results[2], 'handler_error', 'its argument check failed (ledger offline)')
    assertFailure(results[3], 'handler_error', 'no check came within 50 ms')
    assert.deepEqual(seen, ['t0', 't1', 't2', 't3'])
    assert.deepEqual(approvals, ['t0'], 'only a call that passed its check is asked about')
    assert.deepEqual(marks(results[0]).slice(2, 6), ['validate:ok', 'check:ok', 'permission:asked', 'approval:approved'])
    assert.throws(() => gate.register({ name: 'bad', check: 'yes', handler: () => 1 }), /check must be a function/)
  })
})
