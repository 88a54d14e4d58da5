-- Gives back a token bucket booking while it is the latest on its key (see
-- src/reserve.rs): the key still holds the state the booking left (ARGV[2], as stored:
-- the count at which the bucket is full again, or '<owed> <tick index>'); the booking's
-- cost (ARGV[1]) in tokens is owed no more. The key keeps its TTL, which covered the
-- later state. Answers 1 when given back, else 0.
local stored = redis.call('GET', KEYS[1])
if not stored or stored ~= ARGV[2] then return 0 end
local cost = tonumber(ARGV[1])
local o, k = string.match(stored, '^(%d+) (%d+)$')
local value
if o then
  value = string.format('%d %d', math.max(tonumber(o) - cost, 0), tonumber(k))
else
  local full = tonumber(stored)
  if not full then return 0 end
  value = string.format('%d', full - cost)
end
redis.call('SET', KEYS[1], value, 'KEEPTTL')
return 1
