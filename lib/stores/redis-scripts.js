'use strict'
// The Lua scripts of the Redis store: the server side of the stations' store operations, one script per
// operation, named after the station that asks it and the operation (`ratelimit.take`, the rate limit's token
// take; the engine's memory store answers the same operations in crates/core/src/store.rs). Each touches the keys
// of one hash slot only (the keys share a hash tag), so each runs atomically on one node of a Redis Cluster as
// well. Scripts return arrays of strings and integers (Lua numbers become integers on the way out, hence
// fractions travel as strings) and `false` for a missing value (it arrives as null; a Lua nil would cut the array
// short).

const { createHash } = require('node:crypto')

// How both breaker scripts read a breaker's hash. Anything toolgate could not have written there (a key of another
// type, a phase it does not know, a field that is no whole number of at most 15 digits, more trials than
// halfOpenCalls, an opening that ends more than openMs from now) is garbage: the key is deleted and the breaker reads
// as closed with no history, so that garbage never keeps a tool from running, nor lingers.
const BREAKER_STATE = `
local CELLS = {'s0', 's1', 's2', 's3', 's4', 's5', 's6', 's7', 's8', 's9'}
local function whole(text, most)
  if not text or #text > 15 or not string.match(text, '^%d+$') then return nil end
  local n = tonumber(text)
  if most and n > most then return nil end
  return n
end
-- A hash holds the settings it was written under: an opening its openMs ('oms'), a half-open phase its halfOpenCalls
-- ('hoc'). What is garbage is judged by those, so that a process configured otherwise (mid-deploy, say) reads
-- another's state as it is, and a hash no script wrote (an opening of a week with nothing saying so) reads as absent.
local LONGEST_OPEN, MOST_TRIALS = 3155760000000, 4294967295
local function read_breaker(key, now)
  local kind = redis.call('TYPE', key).ok
  if kind == 'hash' then
    local f = redis.call('HMGET', key, 'phase', 'until', 'gen', 'adm', 'pas', 'oms', 'hoc', unpack(CELLS))
    local state = {phase = f[1] or 'closed', until_at = 0, gen = whole(f[3] or '0'), cells = {}}
    local trials = MOST_TRIALS
    if state.phase == 'half_open' then trials = whole(f[7], MOST_TRIALS) end
    state.adm, state.pas = whole(f[4] or '0', trials), whole(f[5] or '0', trials)
    local known = state.phase == 'closed' or state.phase == 'open' or state.phase == 'half_open'
    local valid = known and state.gen and trials and state.adm and state.pas
    if state.phase == 'open' then
      local open_ms = whole(f[6], LONGEST_OPEN)
      state.until_at = open_ms and whole(f[2], now + open_ms)
      valid = valid and state.until_at
    end
    for i = 1, 10 do
      if f[7 + i] then
        local n, ok, failed = string.match(f[7 + i], '^(%d+):(%d+):(%d+)$')
        state.cells[i] = {whole(n), whole(ok), whole(failed)}
        valid = valid and state.cells[i][1] and state.cells[i][2] and state.cells[i][3]
      end
    end
    if valid then return state end
  end
  if kind ~= 'none' then redis.call('DEL', key) end
  return {phase = 'closed', until_at = 0, gen = 0, adm = 0, pas = 0, cells = {}}
end
`

// How a session's hash takes a field another script reads back (a result kept for reuse, an approval remembered):
// a new field in a session that already holds maxSessionKeys fields is skipped (returns 1), so that one session
// cannot grow without bound.
const SESSION_SET = `
local function session_set(session, field, value, ttl, most)
  if redis.call('HEXISTS', session, field) == 0 and redis.call('HLEN', session) >= tonumber(most) then return 1 end
  redis.call('HSET', session, field, value)
  redis.call('PEXPIRE', session, ttl)
  return 0
end
`

const SOURCES = {
  // KEYS: session. ARGV: ttlMs, refuse, reuse, rollbacks ('1' or '0'), maxSessionKeys, [key].
  // Counts the call under its dedup key (a full session counts nothing new: earlier stays 0), takes the count
  // back when the engine refuses repeats, and reads what the session kept for this key and its rollbacks.
  'dedup.count': `
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
  // KEYS: session. ARGV: key.
  'dedup.uncount': `
local field = 'd:' .. ARGV[1]
local count = tonumber(redis.call('HGET', KEYS[1], field))
if count and count > 0 then redis.call('HINCRBY', KEYS[1], field, -1) end
return 0
`,
  // KEYS: session. ARGV: key, value, ttlMs, maxSessionKeys. A query's last result, for the session's repeats
  // under reuse (read back by dedup.count).
  'dedup.keep': `${SESSION_SET}
return session_set(KEYS[1], 'r:' .. ARGV[1], ARGV[2], ARGV[3], ARGV[4])
`,
  // KEYS: entry, lease. ARGV: [owner, leaseMs].
  // A miss with an owner elects one filler per key (single flight); the others learn how long it may take.
  'cache.lookup': `
local value = redis.call('GET', KEYS[1])
if value then return {'hit', value} end
local owner = ARGV[1]
if not owner then return {'miss'} end
local holder = redis.call('GET', KEYS[2])
if holder and holder ~= owner then return {'held', redis.call('PTTL', KEYS[2])} end
redis.call('SET', KEYS[2], owner, 'PX', ARGV[2])
return {'taken'}
`,
  // KEYS: entry, lease. ARGV: value, ttlMs, [owner]. With an owner, the entry is written only while its lease is
  // still the owner's: an invalidation (which drops leases too) or a lease that ran out means another may have
  // computed it since. Only the lease's own owner drops it. Returns 1 when the entry was not written.
  'cache.put': `
local owns = ARGV[3] and redis.call('GET', KEYS[2]) == ARGV[3]
if owns then redis.call('DEL', KEYS[2]) end
if ARGV[3] and not owns then return 1 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 0
`,
  // KEYS: entry, lease. ARGV: owner. A flight that keeps nothing lets its lease go; only the lease's owner drops it.
  'cache.release': `
if redis.call('GET', KEYS[2]) == ARGV[1] then redis.call('DEL', KEYS[2]) end
return 0
`,
  // KEYS: bucket. ARGV: capacity, refillPerSec, maxWaitMs.
  // A token bucket on the server's clock, so every process sees one time. A token reserved ahead (tokens < 0)
  // makes later takers wait behind it. The key expires once the bucket would be full again: a full bucket is
  // the same as none.
  'ratelimit.take': `
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
  'ratelimit.refund': `
local tokens = tonumber(redis.call('HGET', KEYS[1], 'tokens'))
if tokens then redis.call('HSET', KEYS[1], 'tokens', string.format('%.17g', math.min(tonumber(ARGV[1]), tokens + 1))) end
return 0
`,
  // KEYS: counter. ARGV: amount, limit, ttlMs, [windowMs]. A budget counter: adds the amount unless that passes the
  // limit. With a window it counts per fixed window of the server's clock (a new window starts from nothing) and
  // lasts until the window ends; without one it lasts ttlMs after the last spending.
  'budget.spend': `
local amount, limit, ttl, window = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local number, resets = 0, false
if window then
  local time = redis.call('TIME')
  local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
  number = math.floor(now / window)
  resets = (number + 1) * window - now
  ttl = resets + 1000
end
local state = redis.call('HMGET', KEYS[1], 'w', 'n')
local used = 0
if tonumber(state[1]) == number then used = tonumber(state[2]) or 0 end
if used + amount > limit + 1e-9 then return {'over', string.format('%.17g', used), resets} end
redis.call('HSET', KEYS[1], 'w', string.format('%d', number), 'n', string.format('%.17g', used + amount))
redis.call('PEXPIRE', KEYS[1], math.min(math.ceil(ttl), 1e13))
return {'ok', string.format('%.17g', used + amount), number}
`,
  // KEYS: counter. ARGV: amount, window. Gives back a spending of a call that never ran, in the window it was made in.
  'budget.unspend': `
local state = redis.call('HMGET', KEYS[1], 'w', 'n')
local used = tonumber(state[2])
if used and tonumber(state[1]) == tonumber(ARGV[2]) then
  redis.call('HSET', KEYS[1], 'n', string.format('%.17g', math.max(0, used - tonumber(ARGV[1]))))
end
return 0
`,
  // KEYS: breaker. ARGV: halfOpenCalls, trialWaitMs, ttlMs. Lets an attempt through a breaker: 'counted'
  // (closed), 'trial' (half-open, while trial places are left) or 'refused' with the wait; an opening whose time is
  // up turns half-open here. Returns {admit, waitMs, phase, generation, from (the phase it left, or false)}. The same
  // rules as the engine's own breaker (crates/core/src/breaker.rs).
  'breaker.admit': `${BREAKER_STATE}
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local key = KEYS[1]
local state = read_breaker(key, now)
local phase, until_at, gen, adm = state.phase, state.until_at, state.gen, state.adm
local from = false
if phase == 'open' then
  if now < until_at then return {'refused', until_at - now, phase, gen, false} end
  from, phase, gen, adm = 'open', 'half_open', gen + 1, 0
  redis.call('HDEL', key, 'until', 'oms', unpack(CELLS))
  redis.call('HSET', key, 'phase', phase, 'gen', string.format('%d', gen), 'adm', 0, 'pas', 0, 'hoc', ARGV[1])
  redis.call('PEXPIRE', key, math.min(tonumber(ARGV[3]), 1e13))
end
if phase == 'closed' then return {'counted', 0, phase, gen, from} end
if adm < tonumber(ARGV[1]) then
  redis.call('HSET', key, 'adm', adm + 1)
  return {'trial', 0, phase, gen, from}
end
return {'refused', tonumber(ARGV[2]), phase, gen, from}
`,
  // KEYS: breaker. ARGV: admission ('counted' or 'trial'), generation, outcome ('success', 'failure' or 'untested'),
  // failureRate, minCalls, windowMs, openMs, halfOpenCalls, ttlMs. Counts how an admitted attempt ended: a closed
  // breaker counts outcomes in ten slices of its window and opens at the failure rate (from minCalls on, judged
  // after every counted outcome, a success too); a trial of the current half-open phase closes it after
  // halfOpenCalls successes, reopens it on a failure, or gives its place back. Returns {phase, from (the phase it
  // left, or false), calls, failures (when it opened), openLeftMs}.
  'breaker.record': `${BREAKER_STATE}
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local key = KEYS[1]
local outcome, open_ms = ARGV[3], tonumber(ARGV[7])
local state = read_breaker(key, now)
local phase, until_at, gen, adm, pas = state.phase, state.until_at, state.gen, state.adm, state.pas
local from, calls, failures = false, false, false
local function enter(to)
  from, phase, gen = phase, to, gen + 1
  redis.call('HDEL', key, 'until', 'oms', 'hoc', unpack(CELLS))
  redis.call('HSET', key, 'phase', phase, 'gen', string.format('%d', gen), 'adm', 0, 'pas', 0)
  if to == 'open' then
    until_at = now + open_ms
    redis.call('HSET', key, 'until', string.format('%d', until_at), 'oms', string.format('%d', open_ms))
  end
end
if ARGV[1] == 'counted' then
  if phase == 'closed' and outcome ~= 'untested' then
    local width = math.max(1, math.floor(tonumber(ARGV[6]) / 10))
    local slice = math.floor(now / width)
    local field = 's' .. string.format('%d', slice % 10)
    local ok_total, failed_total, ok, failed = 0, 0, 0, 0
    for i = 1, 10 do
      local cell = state.cells[i]
      if cell and cell[1] <= slice and slice - cell[1] < 10 then
        ok_total, failed_total = ok_total + cell[2], failed_total + cell[3]
        if cell[1] == slice then ok, failed = cell[2], cell[3] end
      end
    end
    if outcome == 'success' then
      ok, ok_total = ok + 1, ok_total + 1
    else
      failed, failed_total = failed + 1, failed_total + 1
    end
    redis.call('HSET', key, field, string.format('%d:%d:%d', slice, ok, failed))
    local total = ok_total + failed_total
    if total >= tonumber(ARGV[5]) and failed_total >= tonumber(ARGV[4]) * total then
      calls, failures = total, failed_total
      enter('open')
    end
  end
elseif tonumber(ARGV[2]) == gen and phase == 'half_open' then
  if outcome == 'untested' then
    redis.call('HSET', key, 'adm', math.max(0, adm - 1))
  elseif outcome == 'success' then
    pas = pas + 1
    if pas >= tonumber(ARGV[8]) then enter('closed') else redis.call('HSET', key, 'pas', pas) end
  else
    enter('open')
  end
end
redis.call('PEXPIRE', key, math.min(tonumber(ARGV[9]), 1e13))
local left = 0
if phase == 'open' then left = math.max(0, until_at - now) end
return {phase, from, calls, failures, left}
`,
  // KEYS: session. ARGV: field.
  'permission.remembered': `
return redis.call('HEXISTS', KEYS[1], 'a:' .. ARGV[1])
`,
  // KEYS: session. ARGV: field (the tool and the rule that asked), ttlMs, maxSessionKeys. An approval given for
  // the session, for the other processes to see (read back by permission.remembered).
  'permission.remember': `${SESSION_SET}
return session_set(KEYS[1], 'a:' .. ARGV[1], '1', ARGV[2], ARGV[3])
`,
  // KEYS: session. ARGV: flagged ('1' or '0'), ttlMs. A flag adds one to the session's consecutive rollbacks (an
  // increment, so that processes flagging at once lose none), a result not flagged ends the run.
  'judge.rollbacks': `
if ARGV[1] == '1' then redis.call('HINCRBY', KEYS[1], 'rb', 1) else redis.call('HSET', KEYS[1], 'rb', 0) end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 0
`,
}

/** Each script's source and SHA1 (what EVALSHA names it by), computed once. */
const SCRIPTS = Object.freeze(Object.fromEntries(Object.entries(SOURCES).map(([name, source]) => [
  name, Object.freeze({ source, sha: createHash('sha1').update(source).digest('hex') }),
])))

module.exports = { SCRIPTS }
