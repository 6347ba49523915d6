'use strict'
// Fails when the engine's core crate has an import circle: module A uses module B and B, directly or through others,
// uses A. Dependencies in the core point down (the result contract and leaf types at the bottom, stations above
// them, the engine on top), and this keeps them so. A module is a file or folder right under crates/core/src; a
// folder's files count as its own. Test modules (`#[cfg(test)] mod tests`, at the end of a file) are left out:
// tests may reach anywhere.

const fs = require('node:fs')
const path = require('node:path')

const SRC = path.resolve(__dirname, '..', 'crates', 'core', 'src')

/** Every .rs file under `dir`, with the top-level module it belongs to. */
function files(dir, top) {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(dir, entry.name)
    if (entry.isDirectory()) return files(full, top ?? entry.name)
    if (!entry.name.endsWith('.rs')) return []
    return [{ file: full, module: top ?? entry.name.replace(/\.rs$/, '') }]
  })
}

/** The code of a file without comments, string contents and its test module. */
function code(text) {
  const tests = text.search(/^#\[cfg\(test\)\]\s*\n\s*(pub(\(crate\))? )?mod tests\b/m)
  const body = tests >= 0 ? text.slice(0, tests) : text
  return body
    .replace(/\/\/[^\n]*/g, '')
    .replace(/\/\*[\s\S]*?\*\//g, '')
    .replace(/r#*"[\s\S]*?"#*/g, '""')
    .replace(/"(?:\\.|[^"\\])*"/g, '""')
}

/** The top-level modules a file's code names: `crate::x`, `use crate::{x, y::z}`; `super::` in a folder's file
 * stays in its module. */
function uses(source) {
  const found = new Set()
  for (const [, name] of source.matchAll(/\bcrate::([a-z_][a-z0-9_]*)/g)) found.add(name)
  for (const match of source.matchAll(/\bcrate::\{/g)) {
    for (const item of topLevelItems(source, match.index + match[0].length)) {
      const name = item.trim().split('::')[0].split(/\s/)[0]
      if (/^[a-z_][a-z0-9_]*$/.test(name) && name !== 'self') found.add(name)
    }
  }
  return found
}

/** The comma-separated items of a `{…}` group that opens just before `from`, nested groups kept whole. */
function topLevelItems(source, from) {
  const items = []
  let depth = 0
  let start = from
  for (let i = from; i < source.length; i++) {
    const c = source[i]
    if (c === '{') depth++
    else if (c === '}' && depth > 0) depth--
    else if ((c === ',' || c === '}') && depth === 0) {
      items.push(source.slice(start, i))
      start = i + 1
      if (c === '}') break
    }
  }
  return items
}

function graph() {
  const edges = new Map()
  const all = files(SRC)
  const modules = new Set(all.map((f) => f.module))
  for (const { file, module } of all) {
    if (module === 'lib') continue
    const to = edges.get(module) ?? new Set()
    for (const name of uses(code(fs.readFileSync(file, 'utf8')))) {
      if (name !== module && modules.has(name)) to.add(name)
    }
    edges.set(module, to)
  }
  return edges
}

/** A circle of modules, as a path that comes back to its start; null when there is none. */
function circle(edges) {
  const state = new Map() // module → 'on the path' | 'done'
  const pathTaken = []
  const visit = (module) => {
    state.set(module, 'on the path')
    pathTaken.push(module)
    for (const next of [...(edges.get(module) ?? [])].sort()) {
      if (state.get(next) === 'on the path') return [...pathTaken.slice(pathTaken.indexOf(next)), next]
      if (!state.has(next)) {
        const found = visit(next)
        if (found) return found
      }
    }
    pathTaken.pop()
    state.set(module, 'done')
    return null
  }
  for (const module of [...edges.keys()].sort()) {
    if (!state.has(module)) {
      const found = visit(module)
      if (found) return found
    }
  }
  return null
}

module.exports = { graph, circle, uses, code }

if (require.main === module) {
  const found = circle(graph())
  if (found) {
    console.error(`check-core-imports: the core's modules import each other in a circle: ${found.join(' → ')}`)
    console.error('Move what both need into a leaf module both can use, so that dependencies point down.')
    process.exit(1)
  }
  console.log('check-core-imports: no import circle among the core\'s modules')
}
