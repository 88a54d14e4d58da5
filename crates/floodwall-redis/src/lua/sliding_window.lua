-- Sliding window of sub-buckets, as floodwall-core's algorithm/sliding_window.rs.
-- State: a hash of bucket index ('%d') -> count; the newest index is the largest field.
-- ARGV[3]: limit, ARGV[4]: bucket width (µs), ARGV[5]: buckets per period.
-- Cost: TIME + HGETALL (+ HDEL of buckets that left the window, HINCRBY, PEXPIRE when admitted).
local limit, precision, n = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local bucket = math.floor(now / precision)
local flat = redis.call('HGETALL', KEYS[1])
local counts = {}
for i = 1, #flat, 2 do
  local b, c = tonumber(flat[i]), tonumber(flat[i + 1])
  if not b or not c then return bad_state() end
  counts[#counts + 1] = {b, c, flat[i]}
  -- A clock behind the state counts against the newest bucket.
  if b > bucket then bucket = b end
end
local live, stale, sum = {}, {}, 0
for _, e in ipairs(counts) do
  if e[1] > bucket - n then
    live[#live + 1] = e
    sum = sum + e[2]
  else
    stale[#stale + 1] = e[3]
  end
end
table.sort(live, function(x, y) return x[1] < y[1] end)
-- The bucket `b` leaves the window at (b + n) x precision.
local function leaves(b) return (b + n) * precision - now end
if sum + cost <= limit then
  local reset = 0
  if cost > 0 then
    reset = leaves(bucket)
    if #stale > 0 then redis.call('HDEL', KEYS[1], unpack(stale)) end
    redis.call('HINCRBY', KEYS[1], string.format('%d', bucket), cost)
    redis.call('PEXPIRE', KEYS[1], px(reset))
  elseif sum > 0 then
    reset = leaves(live[#live][1])
  end
  return {1, limit - sum - cost, 0, reset}
end
-- Denied: retry when enough of the oldest buckets have left for the cost to fit.
local dropped, retry = 0, leaves(bucket)
for _, e in ipairs(live) do
  dropped = dropped + e[2]
  if sum - dropped + cost <= limit then
    retry = leaves(e[1])
    break
  end
end
return {0, limit - sum, retry, leaves(live[#live][1])}
