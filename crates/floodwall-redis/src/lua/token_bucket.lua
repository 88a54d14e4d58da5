-- Token bucket, as floodwall-core's algorithm/token_bucket.rs. State: '<tokens> <tick index>'.
-- ARGV[2]: capacity, ARGV[3]: tick length (µs), ARGV[4]: tokens added per tick.
-- Sections for a driver (single.lua, batch.lua): the state's load, then `@step` (decides
-- cost `c` into allowed, remaining, retry, reset; admitting updates the state), `@save`,
-- `@reply` (a single check's answer).
-- Cost: TIME + GET (+ SET when admitted: KEEPTTL, or PX in a new cell of the TTL grid).
local capacity, tick_len, quantum = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local tick = math.floor(now / tick_len)
local tokens, old = capacity, nil
local stored = redis.call('GET', KEYS[1])
if stored then
  local t, k = string.match(stored, '^(%d+) (%d+)$')
  if not t then return redis.error_reply(BAD) end
  t, k = tonumber(t), tonumber(k)
  old = (k + math.ceil((capacity - t) / quantum)) * tick_len
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
-- The state must live until the bucket is full again; the longest span is a refill
-- from empty.
local grid = math.max(math.floor(math.ceil(capacity / quantum) * tick_len / 4000), 1) * 1000
local cell = math.floor((tick + math.ceil((capacity - tokens) / quantum)) * tick_len / grid)
if old and cell == math.floor(old / grid) then
  redis.call('SET', KEYS[1], string.format('%d %d', tokens, tick), 'KEEPTTL')
else
  redis.call('SET', KEYS[1], string.format('%d %d', tokens, tick), 'PX',
    string.format('%d', math.floor(((cell + 1) * grid - now + 999) / 1000) + 1 + slack))
end
-- @reply
-- One integer when it fits: tokens x tick_len + (now - tick x tick_len), negated (-1 - x)
-- when refused; src/reply.rs works out the rest. A clock behind the state, or a bucket too
-- large to pack below 2^53, answers with the four-integer string.
local off = now - tick * tick_len
if off >= 0 and off < tick_len and (capacity + 1) * tick_len <= 9007199254740992 then
  if allowed == 1 then return tokens * tick_len + off end
  return -1 - (tokens * tick_len + off)
end
return string.format('%d %d %d %d', allowed, remaining, retry, reset)
