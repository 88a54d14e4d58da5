-- Token bucket, as floodwall-core's algorithm/token_bucket.rs. State: one integer, the count
-- of tokens added by the epoch-aligned ticks (tick index x quantum) at which the bucket is
-- full again; the tokens owed are that minus the count added so far.
-- ARGV[2]: capacity, ARGV[3]: tick length (µs), ARGV[4]: tokens added per tick.
-- Sections for a driver (single.lua, batch.lua): the state's load, then `@step` (decides
-- cost `c` into allowed, remaining, retry, reset; admitting updates the state), `@save`,
-- `@reply` (a single check's answer).
-- Cost: TIME + GET (+ SET when admitted: KEEPTTL, or PX in a new cell of the TTL grid).
local capacity, tick_len, quantum = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local tick = math.floor(now / tick_len)
local added = tick * quantum
local owed, old = 0, nil
local stored = redis.call('GET', KEYS[1])
if stored then
  old = tonumber(stored)
  if not old then return redis.error_reply(BAD) end
  -- A clock behind the state owes the ticks it has not reached: stricter, never looser.
  if old > added then owed = old - added end
end
-- @step
-- Waits are until `missing` more tokens will have been added: (tick + ceil(missing /
-- quantum)) x tick_len - now, or 0 when none is missing.
-- A clock far enough behind may owe more than the capacity: no tokens, a peek still passes.
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
-- The state must live until the bucket is full again, at tick ceil(state / quantum); the
-- longest span is a refill from empty.
local grid = math.max(math.floor(math.ceil(capacity / quantum) * tick_len / 4000), 1) * 1000
local full = added + owed
local cell = math.floor(math.ceil(full / quantum) * tick_len / grid)
if old and cell == math.floor(math.ceil(old / quantum) * tick_len / grid) then
  redis.call('SET', KEYS[1], string.format('%d', full), 'KEEPTTL')
else
  redis.call('SET', KEYS[1], string.format('%d', full), 'PX',
    string.format('%d', math.floor(((cell + 1) * grid - now + 999) / 1000) + 1 + slack))
end
-- @reply
-- One integer when it fits: tokens x tick_len + (now - tick x tick_len), negated (-1 - x)
-- when refused; src/reply.rs works out the rest. A clock behind the state that owes more
-- than the capacity, or a bucket too large to pack below 2^53, answers with the
-- four-integer string.
if owed <= capacity and (capacity + 1) * tick_len <= 9007199254740992 then
  local x = (capacity - owed) * tick_len + now - tick * tick_len
  if allowed == 1 then return x end
  return -1 - x
end
return string.format('%d %d %d %d', allowed, remaining, retry, reset)
