'use strict'
// Checks that every relative link of the manual (README.md and the guides in docs/) resolves: the file exists and,
// for a link with `#anchor`, the target has a heading with that anchor as GitHub makes it. Links to other sites are
// not followed (the check runs with no network). `node scripts/check-links.js [file...]`; run by `npm test`.

const fs = require('node:fs')
const path = require('node:path')
const { manual } = require('./check-readme.js')

const ROOT = path.resolve(__dirname, '..')

/** A heading's anchor as GitHub makes it: lower case, punctuation but `-` and `_` dropped, spaces as `-`. */
function slug(heading) {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/ /g, '-')
}

const FENCED = /^(```|~~~)[^\n]*\n[\s\S]*?^\1[^\n]*$/gm

/** Markdown without its fenced code blocks and inline code, where a `[x](y)` is not a link. */
function prose(markdown) {
  return markdown.replace(FENCED, '').replace(/`[^`\n]*`/g, '``')
}

/** The anchors of a Markdown file's headings (a repeated heading gets -1, -2…, as GitHub numbers them). */
function headingAnchors(markdown) {
  const seen = new Map()
  const out = new Set()
  for (const line of markdown.replace(FENCED, '').split('\n')) {
    const match = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line)
    if (!match) continue
    const base = slug(match[1].replace(/\[([^\]]*)\]\([^)]*\)/g, '$1'))
    const count = seen.get(base) ?? 0
    seen.set(base, count + 1)
    out.add(count === 0 ? base : `${base}-${count}`)
  }
  return out
}

/** The problems of one file's links: `file:line: why`. */
function problemsOf(file) {
  const text = fs.readFileSync(file, 'utf8')
  const problems = []
  const lines = prose(text).split('\n')
  lines.forEach((line, i) => {
    for (const match of line.matchAll(/!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) {
      const target = match[1]
      if (/^[a-z][a-z+.-]*:/i.test(target)) continue // another site, mail
      const [where, anchor] = target.split('#')
      const resolved = where === '' ? file : path.resolve(path.dirname(file), decodeURIComponent(where))
      const at = `${path.relative(ROOT, file)}:${i + 1}`
      if (!fs.existsSync(resolved)) {
        problems.push(`${at}: ${target}: no such file`)
        continue
      }
      if (anchor === undefined || !resolved.endsWith('.md')) continue
      if (!headingAnchors(fs.readFileSync(resolved, 'utf8')).has(anchor)) {
        problems.push(`${at}: ${target}: ${path.relative(ROOT, resolved)} has no heading with the anchor #${anchor}`)
      }
    }
  })
  return problems
}

function main() {
  const files = process.argv.length > 2 ? process.argv.slice(2).map((f) => path.resolve(f)) : manual()
  const problems = files.flatMap(problemsOf)
  if (problems.length > 0) {
    console.error(problems.join('\n'))
    console.error(`check-links: ${problems.length} link${problems.length === 1 ? '' : 's'} of the manual do not resolve`)
    process.exit(1)
  }
  console.log(`check-links: every link of ${files.length} files resolves`)
}

main()
