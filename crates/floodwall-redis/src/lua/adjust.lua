-- Charges or refunds KEYS[1] after its request was decided (see src/adjust.rs and
-- floodwall-core's algorithm/adjust.rs): the algorithm's `@load`, then its adjust section
-- (src/lua/adjust_<algorithm>.lua) moves the state by the signed amount `c` (ARGV[1]: > 0
-- a charge, < 0 a refund) and says whether it changed, and the algorithm's own `@save`
-- writes it, TTL included. Never coalesced. Answers 1 when the state changed, else 0.
local key = KEYS[1]
local stored = redis.call('GET', key)
-- {load}
local c = cost
local changed = false
-- {adjust}
if changed then
-- {save}
  return 1
end
return 0
