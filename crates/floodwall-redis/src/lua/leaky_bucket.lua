-- Leaky bucket (funnel), as floodwall-core's algorithm/leaky_bucket.rs.
-- State: '<level> <since µs>'. ARGV[3]: capacity, ARGV[4]: µs per leaked unit.
-- Cost: TIME + GET (+ SET PX when admitted).
local capacity, interval = tonumber(ARGV[3]), tonumber(ARGV[4])
local level, since = 0, now
local stored = redis.call('GET', KEYS[1])
if stored then
  local l, s = string.match(stored, '^(%d+) (%d+)$')
  if not l then return bad_state() end
  l, s = tonumber(l), tonumber(s)
  local at = math.max(now, s)
  local leaked = math.floor((at - s) / interval)
  if leaked >= l then
    level, since = 0, at
  else
    -- Leak whole units; the clock advances by exactly the time they took.
    level, since = l - leaked, s + leaked * interval
  end
end
-- When `n` more units will have leaked.
local function after(n)
  if n == 0 then return 0 end
  return since + n * interval - now
end
if level + cost <= capacity then
  local filled = level + cost
  local reset = after(filled)
  if cost > 0 then
    redis.call('SET', KEYS[1], string.format('%d %d', filled, since), 'PX', px(reset))
  end
  return {1, capacity - filled, 0, reset}
end
return {0, capacity - level, after(level + cost - capacity), after(level)}
