'use strict'
// redact.rs's built-in redaction rules in plain JS, for the pure-JS benchmark contender (reference.js): the same rule
// names and patterns in one combined RegExp, `[REDACTED:<rule>]` replacements counted per rule, and the same
// precision guards (placeholders, references, words, numbers, entropy, secret-named keys). It passes redact.rs's own
// samples and look-alikes. Unlike Rust's `regex`, a JS RegExp backtracks, so no linear-time guarantee.

// [name, check, pattern]; check: token (exact shape, not a placeholder), pem, assign:<bits>, generic:<bits>, url.
// `(?-u:\b)` becomes `\b`, which is ASCII in a RegExp without the u flag.
const KEYS = String.raw`(?:password|Password|PASSWORD|passwd|Passwd|PASSWD|passphrase|Passphrase|PASSPHRASE|pwd|Pwd|PWD|secret|Secret|SECRET|(?:api|Api|API|secret|Secret|SECRET|private|Private|PRIVATE)[_.-]?(?:key|Key|KEY)|token|Token|TOKEN|authorization|Authorization|AUTHORIZATION|credentials?|Credentials?|CREDENTIALS?)`
const BUILTINS = [
  // Header lines (`Proc-Type: …`) only after a line break, taken whole through an atomic lookahead: as written in
  // redact.rs the body is ambiguous, which a backtracking engine pays for exponentially on an unclosed block.
  ['private-key', 'pem', String.raw`-----BEGIN[A-Z ]*PRIVATE KEY(?: BLOCK)?-----(?:[A-Za-z0-9+/=]|(?:\r|\\r)?(?:\n|\\n)[ \t]*(?:(?=(?<pemHeader>[A-Z][A-Za-z-]*:[ \t][ -\[\]-~]*))\k<pemHeader>)?)*?-----END[A-Z ]*PRIVATE KEY(?: BLOCK)?-----`],
  ['aws-secret-access-key', 'generic:3.5', String.raw`(?:aws_secret_access_key|AWS_SECRET_ACCESS_KEY|aws_secret_key|AWS_SECRET_KEY|secret_access_key|SECRET_ACCESS_KEY|SecretAccessKey|secretAccessKey)\\?["']?[ \t]*(?::=|=>|[:=])[ \t]*\\?["']?([A-Za-z0-9/+]{40})(?:[^A-Za-z0-9/+=]|$)`],
  ['anthropic-api-key', 'token', String.raw`\bsk-ant-(?:api|admin)[0-9]{2}-[A-Za-z0-9_-]{32,}`],
  ['openai-api-key', 'token', String.raw`\bsk-(?:(?:proj|svcacct|admin)-[A-Za-z0-9_-]{40,}|[A-Za-z0-9]{48}\b|[A-Za-z0-9_-]{8,}T3BlbkFJ[A-Za-z0-9_-]{8,})`],
  ['github-token', 'token', String.raw`\b(?:gh[pousr]_[A-Za-z0-9]{36}|github_pat_[A-Za-z0-9_]{82})\b`],
  ['gitlab-token', 'token', String.raw`\b(?:glpat|glptt|gldt|glrt)-[A-Za-z0-9_-]{20,}(?:\.[A-Za-z0-9_-]+)*`],
  ['slack-webhook', 'token', String.raw`https://hooks\.slack\.com/services/(T[A-Z0-9]{6,}/B[A-Z0-9]{6,}/[A-Za-z0-9]{16,})`],
  ['slack-token', 'token', String.raw`\b(?:xoxe\.)?xox[abeprs]-[A-Za-z0-9-]{10,}`],
  ['stripe-key', 'token', String.raw`\b[rs]k_(?:live|test)_[A-Za-z0-9]{24,}\b`],
  ['google-api-key', 'token', String.raw`\b(AIza[A-Za-z0-9_-]{35})(?:[^A-Za-z0-9_-]|$)`],
  ['aws-access-key-id', 'token', String.raw`\b(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}\b`],
  ['jwt', 'token', String.raw`\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*`],
  ['bearer-token', 'generic:3', String.raw`\b(?:Bearer|bearer|BEARER)[ \t]+([A-Za-z0-9._~+/-]{16,}=*)`],
  ['basic-auth-url', 'url', String.raw`://[^\s:/?#@"'<>]*:([^\s/?#"'<>]+)@`],
  ['secret-assignment', 'assign:2.5', KEYS + String.raw`\\?["']?[ \t]*(?::=|=>|[:=])[ \t]*(?:(?:Basic|basic|Token|token)[ \t]+)?(?:"([^"\r\n]*)"|'([^'\r\n]*)'|\\"([^"\\\r\n]*)\\"|([^\s"'\`,;&|()\[\]{}<>\\]+))`],
]
const EMAIL = ['email', 'email', String.raw`\b[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,24}\b`]
const PHONE = ['phone', 'phone', String.raw`\+[1-9][0-9]{0,3}(?:[ .-]?(?:\([0-9]{1,4}\)|[0-9]{1,5})){1,5}|(?:\([2-9][0-9]{2}\) ?|\b(?:1[ .-])?[2-9][0-9]{2}[.-])[2-9][0-9]{2}[.-][0-9]{4}\b`]
const PLACEHOLDER_VALUES = new Set(['null', 'none', 'nil', 'undefined', 'true', 'false', 'yes', 'no', 'on', 'off', 'empty',
  'required', 'optional', 'hidden', 'secret', 'password', 'passwd', 'pass', 'pwd', 'token', 'changeme', 'test', 'string', 'n/a', 'tbd', 'todo'])
const PLACEHOLDER_WORDS = /example|Example|EXAMPLE|placeholder|Placeholder|PLACEHOLDER|dummy|Dummy|DUMMY|your|Your|YOUR|sample|Sample|SAMPLE|changeme|Changeme|CHANGEME|redacted|Redacted|REDACTED|replace|Replace|REPLACE/
const SECRET_KEY = /(?:password|passwd|passphrase|pwd|secret|secretkey|secretaccesskey|apikey|token|privatekey|authorization|credentials?)$/
const NOT_SECRET_KEY = /(?:page|next|continuation|cursor|sync|max)token$/

const isPlaceholder = (value) => {
  const v = value.trim()
  return v === '' || /^(?:<.+>|\$\{.+\}|\{\{.+\}\}|\[.+\]|%.+%)$/s.test(v) || v.includes('...') || v.includes('…') ||
    v.includes('***') || /^(.)\1*$|(.)\2{5}/su.test(v) || PLACEHOLDER_VALUES.has(v.toLowerCase()) || PLACEHOLDER_WORDS.test(v)
}
const isReference = (v) => v[0] === '$' || v[0] === '%' || (v.includes('.') && v.split('.').every((s) => /^[A-Za-z_$]+[0-9]*$/.test(s))) ||
  (v.includes('_') && /^[A-Z][A-Z0-9_]*$/.test(v))
const isWord = (v) => v.length < 20 && /^[A-Za-z_-]*$/.test(v)
const isPath = (v) => /^(?:\/|~\/|\.\/|\.\.\/|[A-Za-z]:[\\/])/.test(v)
const isProse = (v) => {
  const words = v.split(/\s+/).filter(Boolean)
  return (/^[A-Z]/.test(v) || /[.!?]$/.test(v)) && words.length >= 3 && words.every((w) => { w = w.replace(/[.,!?:]+$/, ''); return isWord(w) || /^[0-9]*$/.test(w) })
}
const isSecretKey = (key) => { const k = key.replace(/[^A-Za-z0-9]/g, '').toLowerCase(); return SECRET_KEY.test(k) && !NOT_SECRET_KEY.test(k) }
function entropy(v) {
  const counts = new Map()
  for (let i = 0; i < v.length; i++) counts.set(v.charCodeAt(i), (counts.get(v.charCodeAt(i)) ?? 0) + 1)
  let bits = 0
  for (const c of counts.values()) bits -= (c / v.length) * Math.log2(c / v.length)
  return bits
}
const plausible = (v, bits) => v.length >= 6 && !isPlaceholder(v) && !isReference(v) && !isWord(v) && !/^[0-9._:+\-/,]*$/.test(v) && entropy(v) >= bits
const isRealPem = (block) => { const body = block.split('-----')[2] ?? ''; return (body.match(/[A-Za-z0-9+/]/g)?.length ?? 0) >= 64 && !body.includes('...') && !/xxxxxx/i.test(body) }
/** The identifier around `at` (`DB_PASSWORD` around `PASSWORD`), looking at most 256 chars back. */
function keyAround(text, at) {
  let start = at, end = at
  while (start > Math.max(0, at - 256) && /[A-Za-z0-9_.-]/.test(text[start - 1])) start--
  while (end < text.length && /[A-Za-z0-9_.-]/.test(text[end])) end++
  return text.slice(start, end)
}
function isPhone(text, s, e) {
  const digits = text.slice(s, e).replace(/[^0-9]/g, '').length
  return digits >= 10 && digits <= 15 && !/[A-Za-z0-9+._/-]/.test(text[s - 1] ?? ' ') && !/[A-Za-z0-9_]/.test(text[e] ?? ' ') && !/^[./-][0-9]/.test(text.slice(e, e + 2))
}

/** Compiles the rules once per executor. null when there are none (`redact: false`). */
function makeRedactor(options = {}) {
  if (options === false) return null
  const { builtin = true, patterns = [], literals = [], env = [], emails = false, phones = false } = options
  const rules = (builtin ? BUILTINS : []).concat(phones ? [PHONE] : []).map(([name, check, pattern]) => ({ name, check, pattern, inner: check !== 'pem' }))
  const byValue = new Map()
  for (const l of literals) byValue.set(l, 'literal')
  for (const v of env) if ((process.env[v] ?? '').length >= 6) byValue.set(process.env[v], `env:${v}`)
  if (byValue.size) rules.push({ name: byValue, check: 'trust', inner: false, pattern: [...byValue.keys()].sort((a, b) => b.length - a.length).map((s) => s.replace(/[.*+?^${}()|[\]\\/-]/g, '\\$&')).join('|') })
  for (const p of patterns) {
    const pattern = typeof p === 'string' ? p : p.pattern
    if (['', ' ', 'a', '\n', '0'].some((probe) => new RegExp(pattern, 'g').exec(probe)?.[0] === '')) throw new TypeError(`redact pattern ${pattern} can match the empty string`)
    rules.push({ name: (typeof p === 'object' && p.name) || 'custom', check: 'trust', inner: false, pattern })
  }
  if (emails) rules.push({ name: 'email', check: 'email', inner: true, pattern: EMAIL[2] })
  if (rules.length === 0 && !builtin) return null
  // Each rule is wrapped in a group; its own groups follow it (up to `end`) and say which part is the secret (the
  // value in key=value). `new RegExp(p + '|').exec('')` has one entry per group of p, plus the whole match.
  let group = 1
  for (const r of rules) {
    const n = new RegExp(`${r.pattern}|`).exec('').length
    Object.assign(r, { group, end: group + n, inner: r.inner && n > 1 })
    group += n
  }
  const source = rules.map((r) => `(${r.pattern})`).join('|')
  return { rules, fields: builtin, all: new RegExp(source || '(?!)', 'g'), at: new RegExp(source || '(?!)', 'y') }
}

/** The rule behind a match and the span [start, end) to replace: the rule's first inner group that matched, else all. */
function identify(r, m) {
  const rule = r.rules.find((x) => m[x.group] !== undefined)
  let secret = m[0]
  if (rule.inner) for (let g = rule.group + 1; g < rule.end; g++) if (m[g] !== undefined) { secret = m[g]; break }
  const start = m.index + m[0].lastIndexOf(secret) // the secret ends a match (or sits just before its last char)
  return [rule, start, start + secret.length]
}

function accepts(r, rule, text, matchStart, s, e, defer) {
  const v = text.slice(s, e)
  if (v === '') return false
  const [check, bits] = rule.check.split(':')
  const ok = check === 'trust' || (check === 'token' ? !isPlaceholder(v)
    : check === 'pem' ? isRealPem(v)
      : check === 'assign' ? isSecretKey(keyAround(text, matchStart)) && plausible(v, +bits) && !isPath(v) && !isProse(v)
        : check === 'generic' ? plausible(v, +bits)
          : check === 'url' ? !isPlaceholder(v) && !isReference(v)
            : check === 'email' ? !/\.(?:png|jpe?g|gif|svg|webp|avif|ico|bmp|js|css|map)$/i.test(v)
              : isPhone(text, s, e))
  if (!ok || !defer || !['assign', 'generic', 'url'].includes(check)) return ok
  // A generic rule gives way to a more telling rule matching right at its value (`token=ghp_…` is a github-token).
  const hay = text.slice(0, e)
  r.at.lastIndex = s
  const m = r.at.exec(hay)
  if (m === null) return true
  const [other, os2, oe] = identify(r, m)
  return other === rule || !accepts(r, other, hay, s, os2, oe, false)
}

/** Replaces each secret by `[REDACTED:<rule>]`, counting per rule into `counts`. A rejected candidate never hides a
 * later secret: the search resumes inside it. */
function redactText(r, text, counts) {
  let out = '', done = 0, pos = 0
  while (pos <= text.length) {
    r.all.lastIndex = pos
    const m = r.all.exec(text)
    if (m === null) break
    const [rule, s, e] = identify(r, m)
    if (accepts(r, rule, text, m.index, s, e, true)) {
      const name = typeof rule.name === 'string' ? rule.name : rule.name.get(text.slice(s, e)) ?? 'literal'
      out += `${text.slice(done, s)}[REDACTED:${name}]`
      counts[name] = (counts[name] ?? 0) + 1
      done = pos = e
    } else pos = s > m.index ? s : Math.max(m.index + m[0].length, m.index + 1)
  }
  return done === 0 ? text : out + text.slice(done)
}

module.exports = { makeRedactor, redactText, isSecretKey, isPlaceholder, isPath }
