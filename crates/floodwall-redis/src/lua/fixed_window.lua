-- Fixed window, as floodwall-core's algorithm/fixed_window.rs. State: '<window index> <used>'.
-- ARGV[2]: limit, ARGV[3]: period (µs; windows are aligned to the Unix epoch).
-- Sections for a driver (single.lua, batch.lua): the state's load, then `@step` (decides
-- cost `c` into allowed, remaining, retry, reset; admitting updates the state), `@save`.
-- Cost: TIME + GET (+ SET when admitted: PX in a new window, KEEPTTL in the same one).
local limit, period = tonumber(ARGV[2]), tonumber(ARGV[3])
local index = math.floor(now / period)
local used, same = 0, false
local stored = redis.call('GET', KEYS[1])
if stored then
  local i, u = string.match(stored, '^(%d+) (%d+)$')
  if not i then return redis.error_reply(BAD) end
  i, u = tonumber(i), tonumber(u)
  -- A clock behind the state counts against the newer window, never a fresh one.
  if i >= index then index, used, same = i, u, true end
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
-- The state lives until its window ends: only a new window sets the TTL.
if same then
  redis.call('SET', KEYS[1], string.format('%d %d', index, used), 'KEEPTTL')
else
  redis.call('SET', KEYS[1], string.format('%d %d', index, used), 'PX',
    string.format('%d', math.floor((until_next + 999) / 1000) + 1 + slack))
end
