-- GCRA, as floodwall-core's algorithm/gcra.rs. State: the theoretical arrival time (TAT), one
-- integer string. Parameters: emission interval, tolerance (burst x interval), in µs.
-- Sections for a driver (single.lua, batch.lua): the parameters, then `@load` (reads the
-- key's value `stored`, which the driver GETs, into the state named on its marker line),
-- `@step` (decides cost `c` into allowed, remaining, retry, reset; admitting updates the
-- state), `@save` (writes the state to `key`), and `@reply`: one integer, from which
-- src/reply.rs works out the rest with the policy's parameters: reset_after when allowed,
-- -1 - reset_after when not.
-- Cost: TIME + GET (+ when admitted, INCRBY of the TAT's move, which keeps the TTL, or SET
-- .. PX in a new cell of the TTL grid).
local interval, tolerance = {p1}, {p2}
-- The TTL grid (see the prelude): the state must live until TAT, at most the tolerance
-- ahead. Worked out once per call, not per key of a batch.
local grid, floor = math.max(math.floor(tolerance / 4000), 1) * 1000, math.floor
-- @load tat old
local tat, old = 0, nil
if stored then
  tat = tonumber(stored)
  if not tat then return redis.error_reply(BAD) end
  old = tat
end
-- @step
local base = tat
if base < now then base = now end
local ahead = base + c * interval - now
if ahead <= tolerance then
  if c > 0 then tat = now + ahead end
  allowed, remaining, retry, reset = 1, math.floor((tolerance - ahead) / interval), 0, ahead
else
  local ttl = base - now
  allowed, retry, reset = 0, ahead - tolerance, ttl
  remaining = math.floor((tolerance - math.min(ttl, tolerance)) / interval)
end
-- @save
local cell = floor(tat / grid)
if old and cell == floor(old / grid) then
  -- The same cell: the TAT moves by what was admitted, the TTL stays (an INCRBY costs
  -- Redis less than a SET .. KEEPTTL). A state Lua reads but Redis cannot add to (text
  -- such as '1.7e15', not written by floodwall) is written whole instead: a batch raises
  -- no error once it writes.
  if type(redis.pcall('INCRBY', key, string.format('%d', tat - old))) ~= 'number' then
    redis.call('SET', key, string.format('%d', tat), 'KEEPTTL')
  end
else
  redis.call('SET', key, string.format('%d', tat), 'PX',
    string.format('%d', math.floor(((cell + 1) * grid - now + 999) / 1000) + 1 + slack))
end
-- @reply
if allowed == 1 then return reset end
return -1 - reset
