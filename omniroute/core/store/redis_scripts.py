"""Lua scripts of the Redis store: each runs atomically on the server.

Every script takes ``now`` from the caller's clock as an argument, so expiry follows the
injected clock exactly as in the memory backend.
"""

from __future__ import annotations

_BACKSTOP_LUA = """
local function backstop(key, ms)
  if redis.call('PTTL', key) < tonumber(ms) then redis.call('PEXPIRE', key, ms) end
end
"""

# KEYS[1] record; ARGV: amount, now, expires_at ('' = never), backstop_ms
_INCR = """
local e = redis.call('HGET', KEYS[1], 'e')
if e and tonumber(e) <= tonumber(ARGV[2]) then
  redis.call('DEL', KEYS[1])
elseif redis.call('EXISTS', KEYS[1]) == 1 then
  return redis.call('HINCRBY', KEYS[1], 'v', ARGV[1])
end
redis.call('HSET', KEYS[1], 'v', ARGV[1])
if ARGV[3] ~= '' then
  redis.call('HSET', KEYS[1], 'e', ARGV[3])
  redis.call('PEXPIRE', KEYS[1], ARGV[4])
end
return tonumber(ARGV[1])
"""

# KEYS[1] record; ARGV: now.  Returns 1 if a live record was removed.
_DELETE = """
local e = redis.call('HGET', KEYS[1], 'e')
local removed = redis.call('DEL', KEYS[1])
if removed == 1 and (not e or tonumber(e) > tonumber(ARGV[1])) then return 1 end
return 0
"""

# KEYS[1] window; ARGV: now, cutoff, member, backstop_ms.  Returns the events in the window.
_WINDOW_ADD = (
    _BACKSTOP_LUA
    + """
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[2])
redis.call('ZADD', KEYS[1], ARGV[1], ARGV[3])
backstop(KEYS[1], ARGV[4])
local total = 0
for _, member in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
  total = total + tonumber(string.match(member, ':(%d+)$'))
end
return total
"""
)

# KEYS[1] semaphore; ARGV: now, holder, limit, expires_at, backstop_ms
_SEM_ACQUIRE = (
    _BACKSTOP_LUA
    + """
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
if not redis.call('ZSCORE', KEYS[1], ARGV[2])
   and redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[3]) then
  return 0
end
redis.call('ZADD', KEYS[1], ARGV[4], ARGV[2])
backstop(KEYS[1], ARGV[5])
return 1
"""
)

# KEYS[1] semaphore; ARGV: now, holder
_SEM_RELEASE = """
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
return redis.call('ZREM', KEYS[1], ARGV[2])
"""

# KEYS[1] semaphore; ARGV: now, holder, expires_at, backstop_ms
_SEM_REFRESH = (
    _BACKSTOP_LUA
    + """
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
if not redis.call('ZSCORE', KEYS[1], ARGV[2]) then return 0 end
redis.call('ZADD', KEYS[1], ARGV[3], ARGV[2])
backstop(KEYS[1], ARGV[4])
return 1
"""
)

SCRIPTS = {
    "incr": _INCR,
    "delete": _DELETE,
    "window_add": _WINDOW_ADD,
    "sem_acquire": _SEM_ACQUIRE,
    "sem_release": _SEM_RELEASE,
    "sem_refresh": _SEM_REFRESH,
}
