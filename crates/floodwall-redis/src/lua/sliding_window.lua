-- Sliding window of sub-buckets, as floodwall-core's algorithm/sliding_window.rs.
-- State: a hash of bucket index ('%d') -> count; the newest index is the largest field.
-- Parameters: limit, bucket width (µs), buckets per period.
-- Cost: TIME + HGETALL + (when admitted) HINCRBY, and HDEL of buckets that left the window
-- and PEXPIRE only when the admission opens a new bucket (a bucket's expiry is fixed).
-- The answer: one integer (src/reply.rs) if it packs below 2^53, negated (-1 - x) when
-- refused; else one string 'allowed remaining retry_after_us reset_after_us'.
local limit, precision, n = {p1}, {p2}, {p3}
local bucket = math.floor(now / precision)
local flat = redis.call('HGETALL', KEYS[1])
-- Each field and count is read once (a `tonumber` is a strtod): `flat` then holds numbers.
for i = 1, #flat, 2 do
  local b, v = tonumber(flat[i]), tonumber(flat[i + 1])
  if not b or not v then return redis.error_reply(BAD) end
  flat[i], flat[i + 1] = b, v
  -- A clock behind the state counts against the newest bucket.
  if b > bucket then bucket = b end
end
-- Buckets after `oldest` are in the window; `newest` is the latest that holds a count.
local oldest, sum, newest, stale = bucket - n, 0, nil, false
for i = 1, #flat, 2 do
  local b = flat[i]
  if b > oldest then
    sum = sum + flat[i + 1]
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
        if flat[i] <= oldest then gone[#gone + 1] = string.format('%d', flat[i]) end
      end
      redis.call('HDEL', KEYS[1], unpack(gone))
    end
    if redis.call('HINCRBY', KEYS[1], string.format('%d', bucket), cost_arg) == cost then
      redis.call('PEXPIRE', KEYS[1],
        string.format('%d', math.floor((reset + 999) / 1000) + 1 + slack))
    end
  elseif newest then
    reset = (newest + n) * precision - now
  end
  -- Admitted: one integer when it fits, remaining x (period + 1) + reset (src/reply.rs).
  local period = n * precision
  if reset <= period and (limit + 1) * (period + 1) <= EXACT then
    return (limit - sum - cost) * (period + 1) + reset
  end
  return string.format('1 %d 0 %d', limit - sum - cost, reset)
end
-- Denied: retry when enough of the oldest buckets have left for the cost to fit. The live
-- buckets are sorted as numbers (no comparison closure, no table per bucket); one alone,
-- the usual case of a short burst, needs no sort.
local live, count = {}, {}
for i = 1, #flat, 2 do
  local b = flat[i]
  if b > oldest then
    live[#live + 1] = b
    count[b] = flat[i + 1]
  end
end
if #live > 1 then table.sort(live) end
-- `first`: the oldest bucket whose leaving makes room (the cost fits once all are gone).
local dropped, first = 0, bucket
for _, b in ipairs(live) do
  dropped = dropped + count[b]
  if sum - dropped + cost <= limit then
    first = b
    break
  end
end
-- Packed: what remains, how many buckets back the newest and `first` are, and the µs to
-- the current bucket's end (more than a bucket when the clock is behind: the string).
-- Buckets counted under a larger limit may hold more than this one: none remain.
local ends, left = (bucket + 1) * precision - now, math.max(limit - sum, 0)
if ends <= precision and (limit + 1) * n * n * (precision + 1) <= EXACT then
  local back = (left * n + bucket - newest) * n + bucket - first
  return -1 - (back * (precision + 1) + ends)
end
return string.format('0 %d %d %d', left, (first + n) * precision - now,
  (newest + n) * precision - now)
