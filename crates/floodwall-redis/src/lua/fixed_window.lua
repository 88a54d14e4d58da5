-- Fixed window, as floodwall-core's algorithm/fixed_window.rs. State: '<window index> <used>'.
-- ARGV[2]: limit, ARGV[3]: period (µs; windows are aligned to the Unix epoch).
-- Sections for a driver (single.lua, batch.lua): the state's load, then `@step` (decides
-- cost `c` into allowed, remaining, retry, reset; admitting updates the state), `@save`.
-- Cost: TIME + GET (+ SET PX when admitted).
local limit, period = tonumber(ARGV[2]), tonumber(ARGV[3])
local index = math.floor(now / period)
local used = 0
local stored = redis.call('GET', KEYS[1])
if stored then
  local i, u = string.match(stored, '^(%d+) (%d+)$')
  if not i then return redis.error_reply(BAD) end
  i, u = tonumber(i), tonumber(u)
  -- A clock behind the state counts against the newer window, never a fresh one.
  if i >= index then index, used = i, u end
end
local until_next = (index + 1) * period - now
-- @step
if used + c <= limit then
  used = used + c
  if used == 0 then
    allowed, remaining, retry, reset = 1, limit, 0, 0
  else
    allowed, remaining, retry, reset = 1, limit - used, 0, until_next
  end
else
  allowed, remaining, retry, reset = 0, limit - used, until_next, until_next
end
-- @save
redis.call('SET', KEYS[1], string.format('%d %d', index, used), 'PX',
  string.format('%d', math.floor((until_next + 999) / 1000) + slack))
