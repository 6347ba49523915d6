'use strict'
// An adapter whose framework cannot be found (not installed, or a toolgate linked from a local clone, which looks
// for it inside the clone) throws an error that names the package and the fix, from CommonJS and from ESM; the MCP
// adapter's ESM build imports its SDK statically (no top-level await), so there Node's own error names the package.

const { describe, it } = require('node:test')
const assert = require('node:assert/strict')
const { spawnSync } = require('node:child_process')
const { PACKAGE_DIR } = require('./helpers')

/** Runs `code` in a child where `pkg` cannot be resolved, as in an app that did not install it. */
function withoutPackage(pkg, code, type) {
  const hide = type === 'module'
    ? `import { register } from 'node:module'
       register('data:text/javascript,' + encodeURIComponent(\`export async function resolve(s, c, next) {
         if (s === ${JSON.stringify(pkg)} || s.startsWith(${JSON.stringify(`${pkg}/`)})) {
           const e = new Error("Cannot find package '" + s + "' imported from " + c.parentURL); e.code = 'ERR_MODULE_NOT_FOUND'; throw e
         }
         return next(s, c)
       }\`))`
    : `const Module = require('node:module')
       const resolve = Module._resolveFilename
       Module._resolveFilename = function (request, ...rest) {
         if (request === ${JSON.stringify(pkg)} || request.startsWith(${JSON.stringify(`${pkg}/`)})) {
           const e = new Error("Cannot find module '" + request + "'"); e.code = 'MODULE_NOT_FOUND'; throw e
         }
         return resolve.call(this, request, ...rest)
       }`
  const preload = type === 'module' ? ['--import', `data:text/javascript,${encodeURIComponent(hide)}`] : ['--require', `data:text/javascript,${encodeURIComponent(hide)}`]
  const args = type === 'module' ? [...preload, '--input-type=module', '-e', code] : ['-e', `${hide}\n${code}`]
  return spawnSync(process.execPath, args, { cwd: PACKAGE_DIR, encoding: 'utf8' })
}

const CASES = [
  { subpath: 'toolgate/langchain', pkg: '@langchain/core', types: ['commonjs', 'module'] },
  { subpath: 'toolgate/mcp', pkg: '@modelcontextprotocol/sdk', types: ['commonjs'] },
]

describe('an adapter whose framework cannot be found', () => {
  for (const { subpath, pkg, types } of CASES) {
    for (const type of types) {
      it(`${subpath} from ${type === 'module' ? 'ESM' : 'CommonJS'}: names ${pkg} and the fix`, () => {
        const load = type === 'module' ? `await import('${subpath}')` : `require('${subpath}')`
        const child = withoutPackage(pkg, `try { ${load}; console.log('loaded') } catch (err) { console.log(JSON.stringify({ message: err.message, code: err.code })) }`, type)
        assert.equal(child.status, 0, child.stderr)
        const { message, code } = JSON.parse(child.stdout.trim().split('\n').at(-1))
        assert.match(message, new RegExp(`^${subpath.replace('/', '\\/')} needs ${pkg.replace('/', '\\/')}, which cannot be found from `))
        assert.ok(message.includes(`npm install ${pkg}`), message)
        assert.ok(message.includes('npm pack'), 'a local clone: install the packed tarball')
        assert.equal(code, type === 'module' ? 'ERR_MODULE_NOT_FOUND' : 'MODULE_NOT_FOUND')
      })
    }
  }

  it('toolgate/mcp from ESM: Node\'s own error, naming the SDK', () => {
    const child = withoutPackage('@modelcontextprotocol/sdk', "try { await import('toolgate/mcp'); console.log('loaded') } catch (err) { console.log(JSON.stringify({ message: err.message, code: err.code })) }", 'module')
    assert.equal(child.status, 0, child.stderr)
    const { message, code } = JSON.parse(child.stdout.trim().split('\n').at(-1))
    assert.equal(code, 'ERR_MODULE_NOT_FOUND')
    assert.match(message, /@modelcontextprotocol\/sdk/)
  })
})
