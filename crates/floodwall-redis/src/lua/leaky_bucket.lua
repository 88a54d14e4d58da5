-- Leaky bucket (funnel), as floodwall-core's algorithm/leaky_bucket.rs.
-- State: '<level> <since µs>'. ARGV[3]: capacity, ARGV[4]: µs per leaked unit.
-- Sections for a driver (single.lua, batch.lua): the state's load, then `@step` (decides
-- cost `c` into allowed, remaining, retry, reset; admitting updates the state), `@save`.
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

-- When `k` more units will have leaked.
local function after(k)
  if k == 0 then return 0 end
  return since + k * interval - now
end
-- @step
if level + c <= capacity then
  level = level + c
  allowed, remaining, retry, reset = 1, capacity - level, 0, after(level)
else
  allowed, remaining, retry, reset = 0, capacity - level, after(level + c - capacity), after(level)
end
-- @save
redis.call('SET', KEYS[1], string.format('%d %d', level, since), 'PX', px(after(level)))
