-- Sliding log, as floodwall-core's algorithm/sliding_log.rs. State: a sorted set, one member
-- '<t>:<cost>' scored t (µs) per admitted microsecond, oldest first.
-- ARGV[3]: limit, ARGV[4]: period (µs).
-- Cost: TIME + ZRANGE (+ ZREMRANGEBYRANK of expired entries, ZADD, PEXPIRE when admitted).
local limit, period = tonumber(ARGV[3]), tonumber(ARGV[4])
local members = redis.call('ZRANGE', KEYS[1], 0, -1)
local ts, cs = {}, {}
for i, m in ipairs(members) do
  local t, c = string.match(m, '^(%d+):(%d+)$')
  if not t then return bad_state() end
  ts[i], cs[i] = tonumber(t), tonumber(c)
end
local count = #ts
-- A clock behind the newest entry counts as the newest entry's time.
local at = now
if count > 0 and ts[count] > now then at = ts[count] end
local first = 1
while first <= count and ts[first] + period <= at do first = first + 1 end
local total = 0
for i = first, count do total = total + cs[i] end
if total + cost <= limit then
  local newest = nil
  if count >= first then newest = ts[count] end
  if cost > 0 then
    if first > 1 then redis.call('ZREMRANGEBYRANK', KEYS[1], 0, first - 2) end
    local merged = cost
    if newest == at then
      -- Requests of the same microsecond share one entry.
      merged = merged + cs[count]
      redis.call('ZREM', KEYS[1], members[count])
    end
    redis.call('ZADD', KEYS[1], string.format('%d', at), string.format('%d:%d', at, merged))
    newest = at
    redis.call('PEXPIRE', KEYS[1], px(at + period - now))
  end
  local reset = 0
  if newest then reset = newest + period - now end
  return {1, limit - total - cost, 0, reset}
end
-- Denied: retry when enough of the oldest entries have left for the cost to fit.
local dropped, retry = 0, 0
for i = first, count do
  dropped = dropped + cs[i]
  if total - dropped + cost <= limit then
    retry = ts[i] + period - now
    break
  end
end
return {0, limit - total, retry, ts[count] + period - now}
