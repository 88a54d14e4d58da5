-- Fixed window, as floodwall-core's algorithm/fixed_window.rs. State: '<window index> <used>'.
-- ARGV[2]: limit, ARGV[3]: period (µs; windows are aligned to the Unix epoch).
-- Sections for a driver (single.lua, batch.lua): the state's load, then `@step` (decides
-- cost `c` into allowed, remaining, retry, reset; admitting updates the state), `@save`,
-- `@reply` (a single check's answer).
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
-- @reply
-- One integer when it fits: used x (period + 1) + the µs to the window's end, negated
-- (-1 - x) when refused; src/reply.rs works out the rest. A clock behind the state, or a
-- window too large to pack below 2^53, answers with the four-integer string.
if until_next <= period and (limit + 1) * (period + 1) <= 9007199254740992 then
  if allowed == 1 then return used * (period + 1) + until_next end
  return -1 - (used * (period + 1) + until_next)
end
return string.format('%d %d %d %d', allowed, remaining, retry, reset)
