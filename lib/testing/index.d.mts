// Types of the ESM entry of toolgate/testing: the same declarations as the CommonJS entry.
export * from './index.js'
