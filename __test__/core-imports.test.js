'use strict'
// The check that keeps the engine's core free of import circles (scripts/check-core-imports.js, run by npm test):
// it reads what each module uses, finds a circle where there is one, and finds none in the core as it is.

const { describe, it } = require('node:test')
const assert = require('node:assert/strict')
const { graph, circle, uses, code } = require('../scripts/check-core-imports.js')

describe('the core import check', () => {
  it('reads the modules a file uses, leaving out comments, strings and its tests', () => {
    const source = code([
      'use crate::result::ToolResult;',
      'use crate::{keys, fields::Fields, text::{clip, quote}};',
      '// use crate::engine;',
      'let s = "crate::options";',
      'fn f() { crate::timer::after(now, wait) }',
      '#[cfg(test)]',
      'mod tests {',
      '    use crate::registry::Registry;',
      '}',
    ].join('\n'))
    assert.deepEqual([...uses(source)].sort(), ['fields', 'keys', 'result', 'text', 'timer'])
  })

  it('finds a circle, and says which modules make it', () => {
    const edges = new Map([['a', new Set(['b'])], ['b', new Set(['c'])], ['c', new Set(['a'])], ['d', new Set(['a'])]])
    assert.deepEqual(circle(edges), ['a', 'b', 'c', 'a'])
    edges.set('c', new Set())
    assert.equal(circle(edges), null)
  })

  it('finds none in the core', () => {
    assert.equal(circle(graph()), null)
  })
})
