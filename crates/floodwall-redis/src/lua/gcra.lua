-- GCRA, as floodwall-core's algorithm/gcra.rs. State: the theoretical arrival time (TAT), one
-- integer string. ARGV[3]: emission interval, ARGV[4]: tolerance (burst x interval), in µs.
-- Sections for a driver (single.lua, batch.lua): the state's load, then `@step` (decides
-- cost `c` into allowed, remaining, retry, reset; admitting updates the state), `@save`.
-- Cost: TIME + GET (+ SET PX when admitted).
local interval, tolerance = tonumber(ARGV[3]), tonumber(ARGV[4])
local tat = 0
local stored = redis.call('GET', KEYS[1])
if stored then
  tat = tonumber(stored)
  if not tat then return bad_state() end
end
-- @step
local base = math.max(tat, now)
local ahead = base + c * interval - now
if ahead <= tolerance then
  if c > 0 then tat = now + ahead end
  allowed, remaining, retry, reset = 1, math.floor((tolerance - ahead) / interval), 0, ahead
else
  local ttl = base - now
  allowed, retry, reset = 0, ahead - tolerance, ttl
  remaining = math.floor((tolerance - math.min(ttl, tolerance)) / interval)
end
-- @save
redis.call('SET', KEYS[1], string.format('%d', tat), 'PX', px(tat - now))
