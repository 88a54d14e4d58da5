-- Fixed window, as floodwall-core's algorithm/fixed_window.rs. Parameters: limit, period
-- (µs; windows are aligned to the Unix epoch). State: one integer, the window's start (µs:
-- window index x period) + used, so that an admission in the same window is an INCRBY of
-- its cost and a load one `tonumber`; or, when used reaches the period (windows of a unit
-- per µs or more, as byte quotas have) or the integer would pass 2^53, '<window index>
-- <used>'. Either is read. Neither depends on the limit, so a window counted under one
-- limit reads under another (docs/quota-changes.md).
-- Sections for a driver (single.lua, batch.lua): the parameters, then `@load` (reads the
-- key's value `stored`, which the driver GETs, into the state named on its marker line),
-- `@step` (decides cost `c` into allowed, remaining, retry, reset; admitting updates the
-- state), `@save` (writes the state to `key`), `@reply` (a check's answer).
-- Cost: TIME + GET (+ when admitted: INCRBY in the same window, SET PX in a new one; the
-- '<index> <used>' form: SET KEEPTTL in the same window).
local limit, period = {p1}, {p2}
-- `left`: the µs to the window's end.
local left = now % period
local index = (now - left) / period
left = period - left
-- @load used same loaded left index packed
-- The window as this key's state has it (a clock behind the state moves it, below).
-- `packed`: whether the stored value is the one integer, which an INCRBY can move.
local left, index = left, index
local used, same, packed = 0, false, false
if stored then
  local i, u
  local v = tonumber(stored)
  if v then
    if not (v >= 0 and v <= EXACT and v % 1 == 0) then
      return redis.error_reply(BAD)
    end
    u = v % period
    i = (v - u) / period
    packed = true
  else
    i, u = string.match(stored, '^(%d+) (%d+)$')
    if not i then return redis.error_reply(BAD) end
    i, u = tonumber(i), tonumber(u)
  end
  -- A clock behind the state counts against the newer window, never a fresh one.
  if i >= index then
    left = left + (i - index) * period
    index, used, same = i, u, true
  else
    packed = false
  end
end
local loaded = used
-- @step
if used + c <= limit then
  used = used + c
  if used == 0 then
    allowed, remaining, retry, reset = 1, limit, 0, 0
  else
    allowed, remaining, retry, reset = 1, limit - used, 0, left
  end
else
  -- A window counted under a larger limit may hold more than this one: none remain.
  allowed, remaining, retry, reset = 0, math.max(limit - used, 0), left, left
end
-- @save
-- Whether the state packs depends on the window index and what it counts: in the same
-- window a packed state that still packs takes the admitted units by INCRBY (the cost's own
-- argument for a single check; a batch's sum is formatted); otherwise the state is written
-- whole, keeping its TTL in the same window, and a new window sets the TTL to its end.
local packs = used < period and (index + 1) * period <= EXACT
if packs and same and packed then
  local delta = used - loaded
  if delta == cost then
    redis.call('INCRBY', key, cost_arg)
  else
    redis.call('INCRBY', key, string.format('%d', delta))
  end
else
  local value
  if packs then
    value = string.format('%d', index * period + used)
  else
    value = string.format('%d %d', index, used)
  end
  if same then
    redis.call('SET', key, value, 'KEEPTTL')
  else
    redis.call('SET', key, value, 'PX',
      string.format('%d', math.floor((left + 999) / 1000) + 1 + slack))
  end
end
-- @reply
-- One integer when it fits: used x (period + 1) + the µs to the window's end, negated
-- (-1 - x) when refused, used shown as at most the limit; src/reply.rs works out the rest.
-- A clock behind the state, or a window too large to pack below 2^53, answers with the
-- four-integer string.
if left <= period and (limit + 1) * (period + 1) <= EXACT then
  if allowed == 1 then return used * (period + 1) + left end
  return -1 - (math.min(used, limit) * (period + 1) + left)
end
return string.format('%d %d %d %d', allowed, remaining, retry, reset)
