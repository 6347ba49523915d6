// The ESM entry of toolgate/redis: the CommonJS module's own objects, so an app that both imports and requires it
// gets one redisStore.
import adapter from './redis.js'

export const { redisStore } = adapter
export default adapter
