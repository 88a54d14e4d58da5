-- Sliding log, as floodwall-core's algorithm/sliding_log.rs. State: a sorted set with one
-- member per admitted unit of cost, '<t>:<i>' scored t (µs), where i is the unit's place in
-- its window when admitted (unique: every member of the same t was counted then, so had a
-- smaller place), and one member '~' scored -1 - the newest entry's time. Every read is then
-- an integer or one score: the newest time (ZSCORE), the units in the window (ZCOUNT), and
-- on a refusal the unit whose leaving makes room (ZRANGEBYSCORE .. LIMIT k-1 1), unless
-- it is the newest.
-- ARGV[2]: limit, ARGV[3]: period (µs).
-- Cost: TIME + ZSCORE (+ EXISTS for a new log; + ZCOUNT unless every entry has left the
-- window; + ZADD when admitted, and PEXPIRE with ZREMRANGEBYSCORE of the entries that left
-- the window when the TTL moves to a new cell of its grid (see the prelude); + ZRANGEBYSCORE
-- when refused, unless the newest unit is the one to wait for).
-- The answer: when admitted, one integer (src/reply.rs) if it packs below 2^53; else, and
-- when refused, one string 'allowed remaining retry_after_us reset_after_us'.
local limit, period = tonumber(ARGV[2]), tonumber(ARGV[3])
local at, newest, used = now, nil, 0
local last = redis.call('ZSCORE', KEYS[1], '~')
if last then
  last = -1 - tonumber(last)
  if not (last >= 0 and last <= 9007199254740991) then return redis.error_reply(BAD) end
  newest = last
  -- A clock behind the newest entry counts as the newest entry's time.
  if newest > at then at = newest end
elseif redis.call('EXISTS', KEYS[1]) == 1 then
  -- A sorted set without the marker is someone else's: refused, not written into.
  return redis.error_reply(BAD)
end
-- Units in the window (at - period, at]; nothing is newer than at. Entries are scored from
-- 0 up and the marker below, so a bound under 0 is raised to -1.
local edge = at - period
local from = '(' .. string.format('%d', math.max(edge, -1))
if newest and newest > edge then
  used = redis.call('ZCOUNT', KEYS[1], from, '+inf')
else
  newest = nil
end
if used + cost <= limit then
  if cost > 0 then
    local t, mark = string.format('%d', at), string.format('%d', -1 - at)
    if cost == 1 then
      redis.call('ZADD', KEYS[1], mark, '~', t, string.format('%s:%d', t, used + 1))
    else
      -- At most 1,000 units per ZADD: Lua's unpack has a limit.
      local args = {'ZADD', KEYS[1], mark, '~'}
      for i = 1, cost do
        args[#args + 1] = t
        args[#args + 1] = string.format('%s:%d', t, used + i)
        if i % 1000 == 0 or i == cost then
          redis.call(unpack(args))
          args = {'ZADD', KEYS[1]}
        end
      end
    end
    -- The log must live until its newest entry leaves the window; the longest span is the
    -- period. Entries that left the window go when the TTL moves (at most 4 times a period,
    -- so the set holds at most the units of a period and a quarter: 2 x limit).
    local grid = math.max(math.floor(period / 4000), 1) * 1000
    local cell = math.floor((at + period) / grid)
    if not last or cell ~= math.floor((last + period) / grid) then
      redis.call('PEXPIRE', KEYS[1],
        string.format('%d', math.floor(((cell + 1) * grid - now + 999) / 1000) + 1 + slack))
      if last then redis.call('ZREMRANGEBYSCORE', KEYS[1], 0, string.format('%d', edge)) end
    end
    newest = at
  end
  local reset = 0
  if newest then reset = newest + period - now end
  -- Admitted: one integer when it fits, remaining x (period + 1) + reset (src/reply.rs).
  if reset <= period and (limit + 1) * (period + 1) <= 9007199254740992 then
    return (limit - used - cost) * (period + 1) + reset
  end
  return string.format('1 %d 0 %d', limit - used - cost, reset)
end
-- Refused: retry when the k-th oldest unit of the window leaves it, making room for the
-- cost. When that is the newest unit (a cost of the whole limit, any refusal of a limit of
-- 1) its time is known; else one read finds it (its member starts with its time).
local k, t = used + cost - limit, newest
if k < used then
  local kth = redis.call('ZRANGEBYSCORE', KEYS[1], from, '+inf', 'LIMIT', k - 1, 1)[1]
  t = kth and tonumber(string.match(kth, '^(%d+):'))
  if not t then return redis.error_reply(BAD) end
end
return string.format('0 %d %d %d', limit - used, t + period - now, newest + period - now)
