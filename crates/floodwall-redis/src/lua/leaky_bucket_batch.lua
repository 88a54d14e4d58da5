-- Leaky bucket over a batch: leaky_bucket.lua's logic once per check, the level carried
-- between them and written once. ARGV[3]: capacity, ARGV[4]: µs per leaked unit.
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
    level, since = l - leaked, s + leaked * interval
  end
end
local function after(k)
  if k == 0 then return 0 end
  return since + k * interval - now
end
local wrote = false
for i = 1, n do
  local c = cost_of(i)
  if level + c <= capacity then
    level = level + c
    if c > 0 then wrote = true end
    answer(1, capacity - level, 0, after(level))
  else
    answer(0, capacity - level, after(level + c - capacity), after(level))
  end
end
if wrote then
  redis.call('SET', KEYS[1], string.format('%d %d', level, since), 'PX', px(after(level)))
end
return out
