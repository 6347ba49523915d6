// The same suite under vitest's forks pool: each file in a child process of its own, one after another.
import { defineConfig, mergeConfig } from 'vitest/config'
import threads from './vitest.config.mjs'

export default mergeConfig(threads, defineConfig({ test: { pool: 'forks' } }))
