-- Leaky bucket (funnel), as floodwall-core's algorithm/leaky_bucket.rs.
-- State: '<level> <since µs>'. ARGV[2]: capacity, ARGV[3]: µs per leaked unit.
-- Sections for a driver (single.lua, batch.lua): the state's load, then `@step` (decides
-- cost `c` into allowed, remaining, retry, reset; admitting updates the state), `@save`,
-- `@reply` (a single check's answer).
-- Cost: TIME + GET (+ SET when admitted: KEEPTTL, or PX in a new cell of the TTL grid).
local capacity, interval = tonumber(ARGV[2]), tonumber(ARGV[3])
local level, since, old = 0, now, nil
local stored = redis.call('GET', KEYS[1])
if stored then
  local l, s = string.match(stored, '^(%d+) (%d+)$')
  if not l then return redis.error_reply(BAD) end
  l, s = tonumber(l), tonumber(s)
  old = s + l * interval
  local at = now
  if s > at then at = s end
  local leaked = math.floor((at - s) / interval)
  if leaked >= l then
    level, since = 0, at
  else
    -- Leak whole units; the clock advances by exactly the time they took.
    level, since = l - leaked, s + leaked * interval
  end
end
-- @step
-- Waits are until `k` more units will have leaked: since + k x interval - now, 0 for none.
if level + c <= capacity then
  level = level + c
  allowed, remaining, retry = 1, capacity - level, 0
else
  allowed, remaining = 0, capacity - level
  retry = since + (level + c - capacity) * interval - now
end
reset = 0
if level > 0 then reset = since + level * interval - now end
-- @save
-- The state must live until the funnel is empty; the longest span is a full one's.
local grid = math.max(math.floor(capacity * interval / 4000), 1) * 1000
local cell = math.floor((since + level * interval) / grid)
if old and cell == math.floor(old / grid) then
  redis.call('SET', KEYS[1], string.format('%d %d', level, since), 'KEEPTTL')
else
  redis.call('SET', KEYS[1], string.format('%d %d', level, since), 'PX',
    string.format('%d', math.floor(((cell + 1) * grid - now + 999) / 1000) + 1 + slack))
end
-- @reply
-- One integer when it fits: level x interval + (now - since), negated (-1 - x) when
-- refused; src/reply.rs works out the rest. A clock behind the state, or a funnel too large
-- to pack below 2^53, answers with the four-integer string.
local d = now - since
if d >= 0 and d < interval and (capacity + 1) * interval <= 9007199254740992 then
  if allowed == 1 then return level * interval + d end
  return -1 - (level * interval + d)
end
return string.format('%d %d %d %d', allowed, remaining, retry, reset)
