-- Token bucket over a batch: token_bucket.lua's logic once per check, tokens carried
-- between them and written once. ARGV[3]: capacity, ARGV[4]: tick (µs), ARGV[5]: quantum.
local capacity, tick_len, quantum = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local tick = math.floor(now / tick_len)
local tokens = capacity
local stored = redis.call('GET', KEYS[1])
if stored then
  local t, k = string.match(stored, '^(%d+) (%d+)$')
  if not t then return bad_state() end
  t, k = tonumber(t), tonumber(k)
  tick = math.max(tick, k)
  tokens = math.min(t + (tick - k) * quantum, capacity)
end
local function wait_for(missing)
  if missing == 0 then return 0 end
  return (tick + math.ceil(missing / quantum)) * tick_len - now
end
local wrote = false
for i = 1, n do
  local c = cost_of(i)
  if c <= tokens then
    tokens = tokens - c
    if c > 0 then wrote = true end
    answer(1, tokens, 0, wait_for(capacity - tokens))
  else
    answer(0, tokens, wait_for(c - tokens), wait_for(capacity - tokens))
  end
end
if wrote then
  redis.call('SET', KEYS[1], string.format('%d %d', tokens, tick), 'PX', px(wait_for(capacity - tokens)))
end
return out
