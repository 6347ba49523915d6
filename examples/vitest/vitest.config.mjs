// The example suite under vitest's threads pool, one file after another (as on a machine with few cores).
import { defineConfig } from 'vitest/config'

export default defineConfig({
  cacheDir: '../../node_modules/.vite-examples',
  test: { pool: 'threads', fileParallelism: false },
})
