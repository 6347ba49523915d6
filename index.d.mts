// Types of the ESM entry (index.mjs): the same declarations as the CommonJS entry, and the entry as the default.
import * as toolgate from './index.js'

export * from './index.js'
export default toolgate
