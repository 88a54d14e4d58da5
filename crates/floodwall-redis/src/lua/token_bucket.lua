-- Token bucket, as floodwall-core's algorithm/token_bucket.rs. State: '<tokens> <tick index>'.
-- ARGV[3]: capacity, ARGV[4]: tick length (µs), ARGV[5]: tokens added per tick.
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
if cost <= tokens then
  local left = tokens - cost
  local reset = wait_for(capacity - left)
  if cost > 0 then
    redis.call('SET', KEYS[1], string.format('%d %d', left, tick), 'PX', px(reset))
  end
  return {1, left, 0, reset}
end
return {0, tokens, wait_for(cost - tokens), wait_for(capacity - tokens)}
