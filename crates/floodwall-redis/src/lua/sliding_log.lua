-- Sliding log, as floodwall-core's algorithm/sliding_log.rs. State: a sorted set, one member
-- '<t>:<cost>:<total>' scored t (µs) per admitted microsecond, where <total> is every cost
-- the log has admitted up to and including this entry: the costs within any span are then a
-- difference of two totals, so a check reads two entries, not the whole log.
-- ARGV[2]: limit, ARGV[3]: period (µs).
-- Cost: TIME + ZRANGE of the newest two entries (+ ZRANGEBYSCORE of the window's oldest
-- when it is neither of them; + ZADD when admitted, PEXPIRE when that moves the TTL to a
-- new cell of its grid (see the prelude), ZREM when merging into the newest entry, and
-- every 16th admitted unit ZREMRANGEBYSCORE of the entries that left the window; a denial
-- whose retry time is not the oldest entry's reads the window's entries to find it).
-- The answer: when admitted, one integer (src/reply.rs) if it packs below 2^53; else, and
-- when refused, one string 'allowed remaining retry_after_us reset_after_us'.
local limit, period = tonumber(ARGV[2]), tonumber(ARGV[3])
local at, newest, ncost, ntotal, lastt = now, nil, 0, 0, nil
-- The newest two entries: when the one before the newest has left the window (or there is
-- none), the newest is the window's oldest and no second read is needed.
local tail = redis.call('ZRANGE', KEYS[1], -2, -1)
local last = tail[#tail]
if last then
  local t, c, s = string.match(last, '^(%d+):(%d+):(%d+)$')
  if not t then return redis.error_reply(BAD) end
  newest, ncost, ntotal = tonumber(t), tonumber(c), tonumber(s)
  lastt = newest
  -- A clock behind the newest entry counts as the newest entry's time.
  if newest > at then at = newest end
end
-- The costs in the window (at - period, at]: the newest total less the total before the
-- window's oldest entry.
local sum, ft, fs, first = 0, nil, nil, nil
local edge = at - period
if last and newest > edge then
  if #tail == 1 then
    first = last
  else
    local pt = tonumber(string.match(tail[1], '^(%d+):'))
    if not pt then return redis.error_reply(BAD) end
    if pt <= edge then first = last end
  end
  if not first then
    first = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. string.format('%d', edge), '+inf',
      'LIMIT', 0, 1)[1]
  end
end
if first then
  local t, c, s = string.match(first, '^(%d+):(%d+):(%d+)$')
  if not t then return redis.error_reply(BAD) end
  ft, fs = tonumber(t), tonumber(s)
  sum = ntotal - (fs - tonumber(c))
else
  newest = nil
end
if sum + cost <= limit then
  if cost > 0 then
    local total = ntotal + cost
    local merged = cost
    -- Requests of the same microsecond share one entry: the merged one is added before
    -- the old one goes, so the key never empties (which would drop its TTL).
    if newest == at then merged = merged + ncost end
    redis.call('ZADD', KEYS[1], string.format('%d', at), string.format('%d:%d:%d', at, merged, total))
    if newest == at then redis.call('ZREM', KEYS[1], last) end
    -- The log must live until its newest entry leaves the window; the longest span is the
    -- period.
    local grid = math.max(math.floor(period / 4000), 1) * 1000
    local cell = math.floor((at + period) / grid)
    if not lastt or cell ~= math.floor((lastt + period) / grid) then
      redis.call('PEXPIRE', KEYS[1],
        string.format('%d', math.floor(((cell + 1) * grid - now + 999) / 1000) + 1 + slack))
    end
    if total % 16 < cost then
      redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', string.format('%d', at - period))
    end
    newest = at
  end
  local reset = 0
  if newest then reset = newest + period - now end
  -- Admitted: one integer when it fits, remaining x (period + 1) + reset (src/reply.rs).
  if reset <= period and (limit + 1) * (period + 1) <= 9007199254740992 then
    return (limit - sum - cost) * (period + 1) + reset
  end
  return string.format('1 %d 0 %d', limit - sum - cost, reset)
end
-- Denied: retry when enough of the oldest entries have left for the cost to fit, i.e. at
-- the first entry whose total reaches the newest total + cost - limit.
-- The window's oldest entry often is that entry (always for a limit of 1); else read on.
local need = ntotal + cost - limit
local retry = ft + period - now
if fs < need then
  local since = '(' .. string.format('%d', edge)
  for _, m in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], since, '+inf')) do
    local t, _, s = string.match(m, '^(%d+):(%d+):(%d+)$')
    if not t then return redis.error_reply(BAD) end
    if tonumber(s) >= need then
      retry = tonumber(t) + period - now
      break
    end
  end
end
return string.format('0 %d %d %d', limit - sum, retry, newest + period - now)
