// The ESM entry of toolgate/devtools: the CommonJS module's own function.
import devtoolsModule from './index.js'

export const { devtools } = devtoolsModule
export default devtoolsModule
