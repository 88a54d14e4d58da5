-- Fixed window, as floodwall-core's algorithm/fixed_window.rs. State: '<window index> <used>'.
-- ARGV[3]: limit, ARGV[4]: period (µs; windows are aligned to the Unix epoch).
-- Cost: TIME + GET (+ SET PX when admitted).
local limit, period = tonumber(ARGV[3]), tonumber(ARGV[4])
local index = math.floor(now / period)
local used = 0
local stored = redis.call('GET', KEYS[1])
if stored then
  local i, u = string.match(stored, '^(%d+) (%d+)$')
  if not i then return bad_state() end
  i, u = tonumber(i), tonumber(u)
  -- A clock behind the state counts against the newer window, never a fresh one.
  if i >= index then index, used = i, u end
end
local until_next = (index + 1) * period - now
if used + cost <= limit then
  used = used + cost
  if cost > 0 then
    redis.call('SET', KEYS[1], string.format('%d %d', index, used), 'PX', px(until_next))
  end
  if used == 0 then return {1, limit, 0, 0} end
  return {1, limit - used, 0, until_next}
end
return {0, limit - used, until_next, until_next}
