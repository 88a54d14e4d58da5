-- Token bucket, as floodwall-core's algorithm/token_bucket.rs: the tokens owed (short of
-- full) as of a tick. Parameters: capacity, tick length (µs), tokens added per tick.
-- State: one integer, the count of tokens the epoch-aligned ticks will have added
-- (tick index x quantum) when the bucket is full again, so owed = state - tick x quantum;
-- or, for a bucket adding more than a token per microsecond, whose count would pass 2^53,
-- '<owed> <tick index>'.
-- Sections for a driver (single.lua, batch.lua): the parameters, then `@load` (reads the
-- key's value `stored`, which the driver GETs, into the state named on its marker line),
-- `@step` (decides cost `c` into allowed, remaining, retry, reset; admitting updates the
-- state), `@save` (writes the state to `key`), `@reply` (a check's answer).
-- Cost: TIME + GET (+ SET when admitted: KEEPTTL, or PX in a new cell of the TTL grid).
local capacity, tick_len, quantum = {p1}, {p2}, {p3}
local pair = quantum > tick_len
local tick = math.floor(now / tick_len)
-- @load owed full
-- owed: as of this tick; full: the tick at which the stored state was full (for its TTL).
local owed, full = 0, nil
if stored then
  local o, k
  if pair then
    o, k = string.match(stored, '^(%d+) (%d+)$')
    o, k = tonumber(o), tonumber(k)
  else
    o, k = tonumber(stored), tick
    if o then o = o - tick * quantum end
  end
  if not o then return redis.error_reply(BAD) end
  -- Behind the state, the ticks not reached yet are owed too: stricter, never looser.
  owed = math.max(o - (tick - k) * quantum, 0)
  full = k + math.ceil(o / quantum)
end
-- @step
-- Waits are until `missing` more tokens will have been added: (tick + ceil(missing /
-- quantum)) x tick_len - now, or 0 when none is missing. A clock far enough behind may owe
-- more than the capacity: no tokens, but a peek still passes.
local tokens = capacity - owed
if tokens < 0 then tokens = 0 end
if c <= tokens then
  owed = owed + c
  allowed, remaining, retry = 1, tokens - c, 0
else
  allowed, remaining = 0, tokens
  retry = (tick + math.ceil((owed + c - capacity) / quantum)) * tick_len - now
end
reset = 0
if owed > 0 then reset = (tick + math.ceil(owed / quantum)) * tick_len - now end
-- @save
-- The state must live until the bucket is full again; the longest span is a refill
-- from empty.
local grid = math.max(math.floor(math.ceil(capacity / quantum) * tick_len / 4000), 1) * 1000
local cell = math.floor((tick + math.ceil(owed / quantum)) * tick_len / grid)
local value
if pair then
  value = string.format('%d %d', owed, tick)
else
  value = string.format('%d', tick * quantum + owed)
end
if full and cell == math.floor(full * tick_len / grid) then
  redis.call('SET', key, value, 'KEEPTTL')
else
  redis.call('SET', key, value, 'PX',
    string.format('%d', math.floor(((cell + 1) * grid - now + 999) / 1000) + 1 + slack))
end
-- @reply
-- One integer when it fits: tokens x tick_len + (now - tick x tick_len), negated (-1 - x)
-- when refused; src/reply.rs works out the rest. A clock behind the state that owes more
-- than the capacity, or a bucket too large to pack below 2^53, answers with the
-- four-integer string.
if owed <= capacity and (capacity + 1) * tick_len <= EXACT then
  local x = (capacity - owed) * tick_len + now - tick * tick_len
  if allowed == 1 then return x end
  return -1 - x
end
return string.format('%d %d %d %d', allowed, remaining, retry, reset)
