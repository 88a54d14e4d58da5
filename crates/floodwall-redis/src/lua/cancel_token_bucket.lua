-- Gives back a token bucket booking while it is the latest on its key (see
-- src/reserve.rs): the key still holds a state meaning what the booking stored (ARGV[2]:
-- the count at which the bucket is full again, or '<owed> <tick index>', equal when
-- owed + tick x quantum (ARGV[3]) is); the booking's cost (ARGV[1]) in tokens is owed no
-- more. The key keeps its TTL, which covered the later state. Answers 1 when given back,
-- else 0.
local stored = redis.call('GET', KEYS[1])
if not stored then return 0 end
local cost, quantum = tonumber(ARGV[1]), tonumber(ARGV[3])
local value
local o, k = string.match(stored, '^(%d+) (%d+)$')
if o then
  local bo, bk = string.match(ARGV[2], '^(%d+) (%d+)$')
  if not bo then return 0 end
  o, k, bo, bk = tonumber(o), tonumber(k), tonumber(bo), tonumber(bk)
  -- The same count when full, without the product that would pass 2^53.
  if (k - bk) * quantum ~= bo - o or bo < cost then return 0 end
  value = string.format('%d %d', bo - cost, bk)
else
  if stored ~= ARGV[2] then return 0 end
  value = string.format('%d', tonumber(stored) - cost)
end
redis.call('SET', KEYS[1], value, 'KEEPTTL')
return 1
