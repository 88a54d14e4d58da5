-- floodwall: renews leases of one key that this process still holds (see
-- src/lease/renew.rs). KEYS[1]: the key's sorted set of leases. ARGV[1]: the lease time in
-- µs; ARGV[2..]: the lease ids.
-- Each lease is pushed to now + the lease time, only if it is still there (XX): one an
-- acquisition found expired and dropped has lost its slot, and is not revived. Answers the
-- ids that were lost.
local key = KEYS[1]
local t = redis.call('TIME')
local lease = tonumber(ARGV[1])
local expiry = string.format('%d', t[1] * 1000000 + t[2] + lease)
local lost = {}
for i = 2, #ARGV do
  if redis.call('ZADD', key, 'XX', 'CH', expiry, ARGV[i]) == 0 then
    lost[#lost + 1] = ARGV[i]
  end
end
local ms = math.floor(lease / 1000) + 1
if #lost < #ARGV - 1 and redis.call('PTTL', key) < ms then
  redis.call('PEXPIRE', key, ms)
end
return lost
