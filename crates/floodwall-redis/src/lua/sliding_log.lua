-- Sliding log, as floodwall-core's algorithm/sliding_log.rs. Parameters: limit, period (µs).
-- State: a sorted set with one member per admitted unit of cost, '<t>:<i>' scored t (µs),
-- where i is the unit's place among the units counted when it was admitted (unique: see
-- below), and a marker '^' scored -1 - the latest cell of the TTL grid an admission reached
-- (see the prelude), below every unit.
-- A check counts the units after now - period (ZCOUNT, an integer; units later than now,
-- left by a clock that stepped back, count too: stricter, never looser). An admission is
-- one ZADD of its units and the marker with LT CH: its answer says whether the marker moved
-- to a new cell, and only then is the TTL renewed and the units that left the window
-- dropped (PEXPIRE, ZREMRANGEBYSCORE), so no check reads the newest time. A refusal reads
-- the unit whose leaving makes room (ZRANGEBYSCORE .. LIMIT k-1 1) and the newest unit
-- (ZRANGE -1 -1) when that is another; a member's time is read from its name.
-- Cost: TIME + ZCOUNT (+ ZADD when admitted, one more per further 1,000 units, and
-- PEXPIRE + ZREMRANGEBYSCORE when the marker moves to a new cell; + ZSCORE, and EXISTS for
-- a new log, when no unit is in the window: a sorted set without the marker is someone
-- else's and refused; + ZRANGEBYSCORE [ZRANGE] when refused, ZRANGE for a peek of a log
-- in use).
-- The answer: when admitted, one integer (src/reply.rs) if it packs below 2^53; else, and
-- when refused, one string 'allowed remaining retry_after_us reset_after_us'.
local limit, period = {p1}, {p2}
local edge = now - period
local from = '(' .. string.format('%d', math.max(edge, -1))
local used = redis.call('ZCOUNT', KEYS[1], from, '+inf')
-- A unit's time is read from its name (no score to parse); `newest` is the newest unit's.
local newest
if used + cost <= limit then
  if cost == 0 then
    -- A peek: the limit is full again when the newest unit leaves.
    local reset = 0
    if used > 0 then
      local top = redis.call('ZRANGE', KEYS[1], -1, -1)[1]
      newest = top and tonumber(string.match(top, '^(%d+):'))
      if not newest then return redis.error_reply(BAD) end
      reset = newest + period - now
    end
    if reset <= period and (limit + 1) * (period + 1) <= EXACT then
      return (limit - used) * (period + 1) + reset
    end
    return string.format('1 %d 0 %d', limit - used, reset)
  end
  -- `fresh`: a new log, with nothing to drop.
  local fresh = false
  if used == 0 and not redis.call('ZSCORE', KEYS[1], '^') then
    -- A sorted set without the marker is someone else's: refused, not written into.
    if redis.call('EXISTS', KEYS[1]) == 1 then return redis.error_reply(BAD) end
    fresh = true
  end
  local t = string.format('%d', now)
  local grid = math.max(math.floor(period / 4000), 1) * 1000
  local cell = math.floor((now + period) / grid)
  local added
  if cost == 1 then
    added = redis.call('ZADD', KEYS[1], 'LT', 'CH', string.format('%d', -1 - cell), '^', t,
      string.format('%s:%d', t, used + 1))
  else
    -- At most 1,000 units per ZADD: Lua's unpack has a limit.
    local args = {'ZADD', KEYS[1], 'LT', 'CH', string.format('%d', -1 - cell), '^'}
    added = 0
    for i = 1, cost do
      args[#args + 1] = t
      args[#args + 1] = string.format('%s:%d', t, used + i)
      if i % 1000 == 0 or i == cost then
        added = added + redis.call(unpack(args))
        args = {'ZADD', KEYS[1], 'LT', 'CH'}
      end
    end
  end
  if added > cost then
    -- The marker moved: a new log, or a later cell. The log must live until its newest
    -- unit leaves the window (the cell's end is after now + period), and the units that
    -- have left go now (so the set holds at most the units of a period and a quarter).
    redis.call('PEXPIRE', KEYS[1],
      string.format('%d', math.floor(((cell + 1) * grid - now + 999) / 1000) + 1 + slack))
    if not fresh then redis.call('ZREMRANGEBYSCORE', KEYS[1], 0, string.format('%d', edge)) end
  elseif added < cost then
    -- A place already taken: the clock stepped back onto the very microsecond of units
    -- whose count has dropped since. (Then the marker did not move: it holds a cell at
    -- least as late as those units'.) The missing units get names of their own.
    local missing, round = cost - added, 0
    while missing > 0 do
      round = round + 1
      local args = {'ZADD', KEYS[1]}
      for i = 1, math.min(missing, 1000) do
        args[#args + 1] = t
        args[#args + 1] = string.format('%s:%d.%d', t, used + i, round)
      end
      missing = missing - redis.call(unpack(args))
    end
  end
  -- Admitted: one integer when it fits, remaining x (period + 1) + reset (src/reply.rs);
  -- the admission is taken as the newest unit, so the limit is full a period from now.
  if (limit + 1) * (period + 1) <= EXACT then
    return (limit - used - cost) * (period + 1) + period
  end
  return string.format('1 %d 0 %d', limit - used - cost, period)
end
-- Refused: retry when the k-th oldest unit of the window leaves it, making room for the
-- cost; the limit is full again when the newest leaves. Units are in time order by score.
local k = used + cost - limit
local member = redis.call('ZRANGEBYSCORE', KEYS[1], from, '+inf', 'LIMIT', k - 1, 1)[1]
local kth = member and tonumber(string.match(member, '^(%d+):'))
newest = kth
if k < used then
  member = redis.call('ZRANGE', KEYS[1], -1, -1)[1]
  newest = member and tonumber(string.match(member, '^(%d+):'))
end
if not (kth and newest) then return redis.error_reply(BAD) end
-- After a clock stepped back, the units counted may pass the limit: none remain.
return string.format('0 %d %d %d', math.max(limit - used, 0), kth + period - now,
  newest + period - now)
