-- Fixed window over a batch: fixed_window.lua's logic once per check, the count carried
-- between them and written once. ARGV[3]: limit, ARGV[4]: period (µs).
local limit, period = tonumber(ARGV[3]), tonumber(ARGV[4])
local index = math.floor(now / period)
local used = 0
local stored = redis.call('GET', KEYS[1])
if stored then
  local i, u = string.match(stored, '^(%d+) (%d+)$')
  if not i then return bad_state() end
  i, u = tonumber(i), tonumber(u)
  if i >= index then index, used = i, u end
end
local until_next = (index + 1) * period - now
local wrote = false
for i = 1, n do
  local c = cost_of(i)
  if used + c <= limit then
    used = used + c
    if c > 0 then wrote = true end
    if used == 0 then answer(1, limit, 0, 0) else answer(1, limit - used, 0, until_next) end
  else
    answer(0, limit - used, until_next, until_next)
  end
end
if wrote then
  redis.call('SET', KEYS[1], string.format('%d %d', index, used), 'PX', px(until_next))
end
return out
