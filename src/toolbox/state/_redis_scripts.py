"""The Lua scripts of the Redis backend: each check-and-count is one atomic script.

Every script reads the clock with ``TIME`` on the Redis server, so expiry and
sliding windows agree across hosts whose clocks drift, unless its last argument
holds a time (an injected clock: tests). Times are integer milliseconds (the
rate windows of ADMIT: microseconds).
"""

from __future__ import annotations

__all__ = ["ADMIT", "CONSUME", "DECIDE", "SUBMIT"]

_NOW = """
local now = tonumber(ARGV[#ARGV])
if now == nil then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
"""

#: KEYS: budget counters then rate windows. ARGV: budget count, a unique call id, then
#: limit and window (budgets: ms, rates: us) per key, then the clock (us, or ''). Returns nil (admitted) or
#: {key index, is rate, ms (budget) or us (rate) to wait}. A rate window's scores are
#: microseconds: no rounding lets a call in before its window has fully passed.
ADMIT = """
local now = tonumber(ARGV[#ARGV])
if now == nil then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local nb = tonumber(ARGV[1])
for i = 1, nb do
  local count = tonumber(redis.call('GET', KEYS[i]) or '0')
  if count >= tonumber(ARGV[1 + 2 * i]) then
    return {i, 0, redis.call('PTTL', KEYS[i])}
  end
end
for i = nb + 1, #KEYS do
  local window = tonumber(ARGV[2 + 2 * i])
  redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', now - window)
  if redis.call('ZCARD', KEYS[i]) >= tonumber(ARGV[1 + 2 * i]) then
    local oldest = redis.call('ZRANGE', KEYS[i], 0, 0, 'WITHSCORES')
    return {i, 1, tonumber(oldest[2]) + window - now}
  end
end
for i = 1, nb do
  if redis.call('INCR', KEYS[i]) == 1 then
    redis.call('PEXPIRE', KEYS[i], ARGV[2 + 2 * i])
  end
end
for i = nb + 1, #KEYS do
  redis.call('ZADD', KEYS[i], now, ARGV[2] .. ':' .. i)
  redis.call('PEXPIRE', KEYS[i], math.ceil(tonumber(ARGV[2 + 2 * i]) / 1000))
end
return false
"""

#: KEYS: the record, the index, the principal's queue (a sorted set: the record keys of its
#: requests that may still be pending, scored by expiry). ARGV: id, created (ms), expires (ms),
#: retain (ms), max pending (0: no bound), fingerprint, then field, value pairs, then the clock.
#: Returns {'id', id}: stored, or the id that already exists (a resubmit never resets a
#: decision) or the identical request still pending; {'full', count}: nothing stored.
#: The queue's members are keys of the same hash tag (one cluster slot), read to prune it.
SUBMIT = (
    _NOW
    + """
if redis.call('EXISTS', KEYS[1]) == 1 then return {'id', ARGV[1]} end
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)
local count = 0
for _, key in ipairs(redis.call('ZRANGE', KEYS[3], 0, -1)) do
  local f = redis.call('HMGET', key, 'state', 'expires_at_ms', 'fingerprint', 'id')
  if f[1] == 'pending' and tonumber(f[2]) > now then
    if f[3] == ARGV[6] then return {'id', f[4]} end
    count = count + 1
  else
    redis.call('ZREM', KEYS[3], key)
  end
end
local most = tonumber(ARGV[5])
if most > 0 and count >= most then return {'full', count} end
for i = 7, #ARGV - 1, 2 do
  redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
end
redis.call('PEXPIREAT', KEYS[1], tonumber(ARGV[3]) + tonumber(ARGV[4]))
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[1])
redis.call('ZADD', KEYS[3], ARGV[3], KEYS[1])
local last = redis.call('ZRANGE', KEYS[3], -1, -1, 'WITHSCORES')
redis.call('PEXPIREAT', KEYS[3], tonumber(last[2]))
return {'id', ARGV[1]}
"""
)

#: KEYS: the record. ARGV: approve (1/0), decided_by, reason, grant ttl (ms), retain (ms), the clock.
#: Returns OK, UNKNOWN_REQUEST, EXPIRED, SELF_APPROVAL or ALREADY_DECIDED:<state>.
DECIDE = (
    _NOW
    + """
if redis.call('EXISTS', KEYS[1]) == 0 then return 'UNKNOWN_REQUEST' end
local f = redis.call('HMGET', KEYS[1], 'state', 'expires_at_ms', 'principal')
local expires = tonumber(f[2])
if (f[1] == 'pending' or f[1] == 'approved') and expires <= now then return 'EXPIRED' end
if f[1] ~= 'pending' then return 'ALREADY_DECIDED:' .. f[1] end
if f[3] == ARGV[2] then return 'SELF_APPROVAL' end
local state = 'denied'
if ARGV[1] == '1' then
  state = 'approved'
  expires = now + tonumber(ARGV[4])
end
redis.call('HSET', KEYS[1], 'state', state, 'decided_by', ARGV[2], 'decided_at_ms', now,
  'reason', ARGV[3], 'expires_at_ms', expires, 'expires_at', string.format('%.3f', expires / 1000))
redis.call('PEXPIREAT', KEYS[1], expires + tonumber(ARGV[5]))
return 'OK'
"""
)

#: KEYS: the record. ARGV: the fingerprint, the clock. Returns 1 exactly once for an approved,
#: unexpired grant.
CONSUME = (
    _NOW
    + """
local f = redis.call('HMGET', KEYS[1], 'state', 'expires_at_ms', 'fingerprint')
if f[1] ~= 'approved' or tonumber(f[2]) <= now or f[3] ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'state', 'used', 'used_at_ms', now)
return 1
"""
)
