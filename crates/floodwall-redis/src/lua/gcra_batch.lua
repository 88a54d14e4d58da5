-- GCRA over a batch: gcra.lua's logic once per check, the TAT carried between them and
-- written once. ARGV[3]: emission interval, ARGV[4]: tolerance (µs).
local interval, tolerance = tonumber(ARGV[3]), tonumber(ARGV[4])
local tat = 0
local stored = redis.call('GET', KEYS[1])
if stored then
  tat = tonumber(stored)
  if not tat then return bad_state() end
end
local wrote = false
for i = 1, n do
  local c = cost_of(i)
  local base = math.max(tat, now)
  local ahead = base + c * interval - now
  if ahead <= tolerance then
    if c > 0 then
      tat = now + ahead
      wrote = true
    end
    answer(1, math.floor((tolerance - ahead) / interval), 0, ahead)
  else
    local ttl = base - now
    answer(0, math.floor((tolerance - math.min(ttl, tolerance)) / interval), ahead - tolerance, ttl)
  end
end
if wrote then
  redis.call('SET', KEYS[1], string.format('%d', tat), 'PX', px(tat - now))
end
return out
