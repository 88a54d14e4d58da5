-- Token bucket, as floodwall-core's algorithm/token_bucket.rs. State: '<tokens> <tick index>'.
-- ARGV[3]: capacity, ARGV[4]: tick length (µs), ARGV[5]: tokens added per tick.
-- Sections for a driver (single.lua, batch.lua): the state's load, then `@step` (decides
-- cost `c` into allowed, remaining, retry, reset; admitting updates the state), `@save`.
-- Cost: TIME + GET (+ SET PX when admitted).
local capacity, tick_len, quantum = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local tick = math.floor(now / tick_len)
local tokens = capacity
local stored = redis.call('GET', KEYS[1])
if stored then
  local t, k = string.match(stored, '^(%d+) (%d+)$')
  if not t then return bad_state() end
  t, k = tonumber(t), tonumber(k)
  -- A clock behind the state adds nothing and never moves the anchor back.
  tick = math.max(tick, k)
  tokens = math.min(t + (tick - k) * quantum, capacity)
end

-- When `missing` more tokens will have been added.
local function wait_for(missing)
  if missing == 0 then return 0 end
  return (tick + math.ceil(missing / quantum)) * tick_len - now
end
-- @step
if c <= tokens then
  tokens = tokens - c
  allowed, remaining, retry, reset = 1, tokens, 0, wait_for(capacity - tokens)
else
  allowed, remaining, retry, reset = 0, tokens, wait_for(c - tokens), wait_for(capacity - tokens)
end
-- @save
redis.call('SET', KEYS[1], string.format('%d %d', tokens, tick), 'PX', px(wait_for(capacity - tokens)))
