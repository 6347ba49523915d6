'use strict'
// An adapter's framework is the app's own copy, an optional peer: when it cannot be found, the error says what to
// install, and why a toolgate linked from a local clone does not see the app's copy.

/** `err` from loading `pkg` for the adapter behind `subpath`: when `pkg` itself is missing, an Error naming the fix;
 * any other error as it is (a broken install of the framework is its own to report). */
function missingFramework(err, pkg, subpath) {
  const missing = (err?.code === 'MODULE_NOT_FOUND' || err?.code === 'ERR_MODULE_NOT_FOUND') && String(err.message).includes(`'${pkg}`)
  if (!missing) return err
  const fix = new Error(
    `${subpath} needs ${pkg}, which cannot be found from ${__dirname}. Install it in your app: npm install ${pkg}. ` +
      `A toolgate installed from a local clone (npm install ../toolgate) is linked, and its adapters look for ${pkg} ` +
      'inside the clone, not in your app: run npm pack in the clone and install the tarball it makes instead ' +
      '(npm install ../toolgate/toolgate-<version>.tgz).',
    { cause: err },
  )
  fix.code = err.code
  return fix
}

/** A loader's catch: rethrows what loading `pkg` threw, as `missingFramework` words it. */
const rethrowing = (pkg, subpath) => (err) => {
  throw missingFramework(err, pkg, subpath)
}

module.exports = { rethrowing }
