// Types of the ESM entry of toolgate/redis: the same declarations as the CommonJS entry, and the module as the
// default.
import * as adapter from './redis.js'

export * from './redis.js'
export default adapter
