-- floodwall: takes a lease on a slot of an in-flight limit (see src/lease/mod.rs).
-- KEYS[1]: the key's sorted set of leases, member = lease id, score = expiry in µs since the
-- Unix epoch on this server's clock. ARGV[1]: the new lease's id (unique across processes),
-- ARGV[2]: the limit, ARGV[3]: the lease time in µs.
-- Answers how many are in flight with this lease (>= 1) when granted, else -1 - how many
-- are in flight: an integer either way, the cheapest reply to send.
local key = KEYS[1]
local held = redis.call('ZCARD', key)
local t = redis.call('TIME')
local now = t[1] * 1000000 + t[2]
if held >= tonumber(ARGV[2]) then
  -- Full, unless some leases expired (a process killed, a partition): they are looked for
  -- only then, so the usual acquisition reads no range. Until the key is full, an expired
  -- lease still counts in the figure answered (the headers' remaining), never in a refusal.
  held = held - redis.call('ZREMRANGEBYSCORE', key, '-inf', string.format('%d', now))
  if held >= tonumber(ARGV[2]) then
    return -1 - held
  end
end
local lease = tonumber(ARGV[3])
redis.call('ZADD', key, string.format('%d', now + lease), ARGV[1])
-- The key lives as long as its latest lease (+ 1 ms for the millisecond clock): a new key
-- gets its TTL, an existing one's is never shortened, since another limit of the same name
-- may hold longer leases in it.
local ms = math.floor(lease / 1000) + 1
if held == 0 or redis.call('PTTL', key) < ms then
  redis.call('PEXPIRE', key, ms)
end
return held + 1
