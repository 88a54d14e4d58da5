-- GCRA, as floodwall-core's algorithm/gcra.rs. State: the theoretical arrival time (TAT), one
-- integer string. ARGV[3]: emission interval, ARGV[4]: tolerance (burst x interval), in µs.
-- Cost: TIME + GET (+ SET PX when admitted).
local interval, tolerance = tonumber(ARGV[3]), tonumber(ARGV[4])
local tat = 0
local stored = redis.call('GET', KEYS[1])
if stored then
  tat = tonumber(stored)
  if not tat then return bad_state() end
end
local base = math.max(tat, now)
local ahead = base + cost * interval - now
if ahead <= tolerance then
  if cost > 0 then
    redis.call('SET', KEYS[1], string.format('%d', now + ahead), 'PX', px(ahead))
  end
  return {1, math.floor((tolerance - ahead) / interval), 0, ahead}
end
local ttl = base - now
return {0, math.floor((tolerance - math.min(ttl, tolerance)) / interval), ahead - tolerance, ttl}
