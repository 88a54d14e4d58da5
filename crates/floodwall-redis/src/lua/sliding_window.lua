-- Sliding window of sub-buckets, as floodwall-core's algorithm/sliding_window.rs.
-- State: a hash of bucket index ('%d') -> count; the newest index is the largest field.
-- ARGV[2]: limit, ARGV[3]: bucket width (µs), ARGV[4]: buckets per period.
-- Cost: TIME + HGETALL + (when admitted) HINCRBY, and HDEL of buckets that left the window
-- and PEXPIRE only when the admission opens a new bucket (a bucket's expiry is fixed).
-- The answer: when admitted, one integer (src/reply.rs) if it packs below 2^53; else, and
-- when refused, one string 'allowed remaining retry_after_us reset_after_us'.
local limit, precision, n = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local bucket = math.floor(now / precision)
local flat = redis.call('HGETALL', KEYS[1])
for i = 1, #flat, 2 do
  local b = tonumber(flat[i])
  if not b or not tonumber(flat[i + 1]) then return redis.error_reply(BAD) end
  -- A clock behind the state counts against the newest bucket.
  if b > bucket then bucket = b end
end
-- Buckets after `oldest` are in the window; `newest` is the latest that holds a count.
local oldest, sum, newest, stale = bucket - n, 0, nil, false
for i = 1, #flat, 2 do
  local b = tonumber(flat[i])
  if b > oldest then
    sum = sum + tonumber(flat[i + 1])
    if not newest or b > newest then newest = b end
  else
    stale = true
  end
end
if sum + cost <= limit then
  local reset = 0
  if cost > 0 then
    -- The bucket `b` leaves the window at (b + n) x precision.
    reset = (bucket + n) * precision - now
    if stale then
      local gone = {}
      for i = 1, #flat, 2 do
        if tonumber(flat[i]) <= oldest then gone[#gone + 1] = flat[i] end
      end
      redis.call('HDEL', KEYS[1], unpack(gone))
    end
    if redis.call('HINCRBY', KEYS[1], string.format('%d', bucket), cost) == cost then
      redis.call('PEXPIRE', KEYS[1], string.format('%d', math.floor((reset + 999) / 1000) + 1 + slack))
    end
  elseif newest then
    reset = (newest + n) * precision - now
  end
  -- Admitted: one integer when it fits, remaining x (period + 1) + reset (src/reply.rs).
  local period = n * precision
  if reset <= period and (limit + 1) * (period + 1) <= 9007199254740992 then
    return (limit - sum - cost) * (period + 1) + reset
  end
  return string.format('1 %d 0 %d', limit - sum - cost, reset)
end
-- Denied: retry when enough of the oldest buckets have left for the cost to fit.
local live = {}
for i = 1, #flat, 2 do
  local b = tonumber(flat[i])
  if b > oldest then live[#live + 1] = {b, tonumber(flat[i + 1])} end
end
table.sort(live, function(x, y) return x[1] < y[1] end)
local dropped, retry = 0, (bucket + n) * precision - now
for _, e in ipairs(live) do
  dropped = dropped + e[2]
  if sum - dropped + cost <= limit then
    retry = (e[1] + n) * precision - now
    break
  end
end
return string.format('0 %d %d %d', limit - sum, retry, (newest + n) * precision - now)
