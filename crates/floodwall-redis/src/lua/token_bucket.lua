-- Token bucket, as floodwall-core's algorithm/token_bucket.rs. State: '<tokens> <tick index>'.
-- ARGV[2]: capacity, ARGV[3]: tick length (µs), ARGV[4]: tokens added per tick.
-- Sections for a driver (single.lua, batch.lua): the state's load, then `@step` (decides
-- cost `c` into allowed, remaining, retry, reset; admitting updates the state), `@save`.
-- Cost: TIME + GET (+ SET PX when admitted).
local capacity, tick_len, quantum = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local tick = math.floor(now / tick_len)
local tokens = capacity
local stored = redis.call('GET', KEYS[1])
if stored then
  local t, k = string.match(stored, '^(%d+) (%d+)$')
  if not t then return redis.error_reply(BAD) end
  t, k = tonumber(t), tonumber(k)
  -- A clock behind the state adds nothing and never moves the anchor back.
  if k > tick then tick = k end
  tokens = math.min(t + (tick - k) * quantum, capacity)
end
-- @step
-- Waits are until `missing` more tokens will have been added: (tick + ceil(missing /
-- quantum)) x tick_len - now, or 0 when none is missing.
if c <= tokens then
  tokens = tokens - c
  allowed, remaining, retry, reset = 1, tokens, 0, 0
else
  allowed, remaining, reset = 0, tokens, 0
  retry = (tick + math.ceil((c - tokens) / quantum)) * tick_len - now
end
if tokens < capacity then
  reset = (tick + math.ceil((capacity - tokens) / quantum)) * tick_len - now
end
-- @save
redis.call('SET', KEYS[1], string.format('%d %d', tokens, tick), 'PX', string.format('%d',
  math.floor(((tick + math.ceil((capacity - tokens) / quantum)) * tick_len - now + 999) / 1000)
  + slack))
