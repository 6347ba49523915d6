// Types of the ESM entry (index.mjs): the same declarations as the CommonJS entry.
export * from './index.js'
