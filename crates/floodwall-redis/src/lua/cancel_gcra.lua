-- Gives back a booking of GCRA (and the funnel) while it is the latest on its key (see
-- src/reserve.rs): the key still holds the TAT the booking left (ARGV[2], as stored); the
-- TAT goes back by the booking's cost (ARGV[1]) times the emission interval (ARGV[3]). The
-- key keeps its TTL, which covered the later TAT. Answers 1 when given back, else 0.
local stored = redis.call('GET', KEYS[1])
if not stored or stored ~= ARGV[2] then return 0 end
local tat = tonumber(stored)
if not tat then return 0 end
local back = tat - tonumber(ARGV[1]) * tonumber(ARGV[3])
redis.call('SET', KEYS[1], string.format('%d', back), 'KEEPTTL')
return 1
