// A user-style vitest suite over an agent's tools: each file builds its own executor, as a suite would. Under the
// threads pool each file runs in a worker thread of its own, one after another.
import { beforeAll, describe, expect, test } from 'vitest'

let weatherGate
beforeAll(async () => {
  // Fixtures take a moment to set up, as real ones do: the addon loads after the previous file's worker has ended.
  await new Promise((resolve) => setTimeout(resolve, 300))
  ;({ weatherGate } = await import('../tools.js'))
})

describe('get_weather', () => {
  test('a valid call runs and returns its JSON', async () => {
    const [result] = await weatherGate().execute([{ type: 'tool_use', id: 't1', name: 'get_weather', input: { city: 'Lisbon' } }])
    expect(result.success).toBe(true)
    expect(JSON.parse(result.output)).toEqual({ city: 'Lisbon', tempC: 21 })
  })

  test('a call without its city is refused before the handler runs', async () => {
    const [result] = await weatherGate().execute([{ type: 'tool_use', id: 't2', name: 'get_weather', input: {} }])
    expect(result.errorKind).toBe('invalid_arguments')
    expect(result.error).toContain('missing required property "city"')
  })
})
