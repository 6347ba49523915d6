// Types of the ESM entry of toolgate/devtools: the same declarations as the CommonJS entry, and the module as the
// default.
import * as devtoolsModule from './index.js'

export * from './index.js'
export default devtoolsModule
