'use strict'
// The Lua scripts of the Redis store, one per kind of operation. Each touches the keys of one hash slot only (the
// keys share a hash tag), so each runs atomically on one node of a Redis Cluster as well. Scripts return arrays
// of strings and integers (Lua numbers become integers on the way out, hence fractions travel as strings) and
// `false` for a missing value (it arrives as null; a Lua nil would cut the array short).

const { createHash } = require('node:crypto')

const SOURCES = {
  // KEYS: session. ARGV: ttlMs, refuse, reuse, rollbacks ('1' or '0'), maxSessionKeys, [key].
  // Counts the call under its dedup key (a full session counts nothing new: earlier stays 0), takes the count
  // back when the engine refuses repeats, and reads what the session kept for this key and its rollbacks.
  count: `
local session, key = KEYS[1], ARGV[6]
local earlier, reused, rollbacks = 0, false, false
if key then
  local field = 'd:' .. key
  if redis.call('HEXISTS', session, field) == 1 or redis.call('HLEN', session) < tonumber(ARGV[5]) then
    earlier = redis.call('HINCRBY', session, field, 1) - 1
    if ARGV[2] == '1' and earlier > 0 then redis.call('HINCRBY', session, field, -1) end
  end
  if ARGV[3] == '1' and earlier > 0 then reused = redis.call('HGET', session, 'r:' .. key) end
end
if ARGV[4] == '1' then rollbacks = tonumber(redis.call('HGET', session, 'rb')) or 0 end
redis.call('PEXPIRE', session, ARGV[1])
return {earlier, reused, rollbacks}
`,
  // KEYS: session. ARGV: field.
  remembered: `
return redis.call('HEXISTS', KEYS[1], 'a:' .. ARGV[1])
`,
  // KEYS: entry, lease. ARGV: [owner, leaseMs].
  // A miss with an owner elects one filler per key (single flight); the others learn how long it may take.
  lookup: `
local value = redis.call('GET', KEYS[1])
if value then return {'hit', value} end
local owner = ARGV[1]
if not owner then return {'miss'} end
local holder = redis.call('GET', KEYS[2])
if holder and holder ~= owner then return {'held', redis.call('PTTL', KEYS[2])} end
redis.call('SET', KEYS[2], owner, 'PX', ARGV[2])
return {'taken'}
`,
  // KEYS: bucket. ARGV: capacity, refillPerSec, maxWaitMs.
  // A token bucket on the server's clock, so every process sees one time. A token reserved ahead (tokens < 0)
  // makes later takers wait behind it. The key expires once the bucket would be full again: a full bucket is
  // the same as none.
  take: `
local capacity, refill, max_wait = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + tonumber(time[2]) / 1000
local state = redis.call('HMGET', KEYS[1], 'tokens', 'at')
local tokens, at = tonumber(state[1]), tonumber(state[2])
if not tokens or not at then tokens, at = capacity, now end
tokens = math.min(capacity, tokens + math.max(0, now - at) / 1000 * refill)
local outcome, wait = 'now', 0
if tokens >= 1 then
  tokens = tokens - 1
else
  wait = (1 - tokens) / refill * 1000
  if wait <= max_wait then outcome, tokens = 'after', tokens - 1 else outcome = 'refused' end
end
redis.call('HSET', KEYS[1], 'tokens', string.format('%.17g', tokens), 'at', string.format('%.17g', now))
-- At most 1e13 ms (317 years): a larger number would be written in exponent form, which PEXPIRE refuses.
redis.call('PEXPIRE', KEYS[1], math.min(math.ceil((capacity - tokens) / refill * 1000) + 1000, 1e13))
return {outcome, string.format('%.17g', wait)}
`,
  // KEYS: bucket. ARGV: capacity. A bucket already gone is full: nothing to give back.
  refund: `
local tokens = tonumber(redis.call('HGET', KEYS[1], 'tokens'))
if tokens then redis.call('HSET', KEYS[1], 'tokens', string.format('%.17g', math.min(tonumber(ARGV[1]), tokens + 1))) end
return 0
`,
  // KEYS: entry, lease. ARGV: value, ttlMs ('' stores nothing: a release), [owner]. With an owner, the entry is
  // written only while its lease is still the owner's: an invalidation (which drops leases too) or a lease that
  // ran out means another may have computed it since. Only the lease's own owner drops it. Returns 1 when the
  // entry was not written.
  put: `
local owns = ARGV[3] and redis.call('GET', KEYS[2]) == ARGV[3]
if owns then redis.call('DEL', KEYS[2]) end
if ARGV[2] == '' or (ARGV[3] and not owns) then return 1 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 0
`,
  // KEYS: session. ARGV: flagged ('1' or '0'), ttlMs. A flag adds one to the session's consecutive rollbacks (an
  // increment, so that processes flagging at once lose none), a result not flagged ends the run.
  rollbacks: `
if ARGV[1] == '1' then redis.call('HINCRBY', KEYS[1], 'rb', 1) else redis.call('HSET', KEYS[1], 'rb', 0) end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 0
`,
  // KEYS: session. ARGV: key.
  uncount: `
local field = 'd:' .. ARGV[1]
local count = tonumber(redis.call('HGET', KEYS[1], field))
if count and count > 0 then redis.call('HINCRBY', KEYS[1], field, -1) end
return 0
`,
  // KEYS: session. ARGV: field, value, ttlMs, [maxSessionKeys]. Returns 1 when skipped: a new field in a session
  // that already holds maxSessionKeys fields (without the cap, one session could grow without bound).
  sessionSet: `
if ARGV[4] and redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 and redis.call('HLEN', KEYS[1]) >= tonumber(ARGV[4]) then
  return 1
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 0
`,
}

/** Each script's source and SHA1 (what EVALSHA names it by), computed once. */
const SCRIPTS = Object.freeze(Object.fromEntries(Object.entries(SOURCES).map(([name, source]) => [
  name, Object.freeze({ source, sha: createHash('sha1').update(source).digest('hex') }),
])))

module.exports = { SCRIPTS }
