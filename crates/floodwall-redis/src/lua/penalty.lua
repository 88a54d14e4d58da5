-- A policy's penalty (floodwall-core's Penalty; the rules are docs/penalties.md's): after
-- `after` refusals within `within`, the key is banned; ban number n (counted while earlier
-- bans are remembered) lasts ban x growth^(n-1), cut to max_ban. Pasted by src/script.rs
-- around a check's step, only into the scripts of policies with a penalty: the others'
-- scripts are unchanged. KEYS[2..4]: the ban, the refusals counted (strikes), the bans
-- remembered (src/key.rs), in the rate key's slot (src/script.rs renumbers them in a
-- script of several policies). Times are µs on the script's `now` (the server's clock, or
-- the explicit time): each value holds the time it lapses at, so a ban ends on the clock
-- that decided it; a key's TTL only lets Redis drop it afterwards (+ `slack`). A banned
-- key is answered 'ban <remainder µs>' (src/reply.rs), before its rate key is read: a ban
-- costs TIME + GET. Names start with `pen_`, which no algorithm uses.
-- @ban
-- '<end µs>'; an ended ban is no ban, whatever its TTL says.
local pen_until = redis.call('GET', KEYS[2])
if pen_until then
  pen_until = tonumber(pen_until)
  if not pen_until then return redis.error_reply(BAD) end
  if pen_until > now then return string.format('ban %d', pen_until - now) end
end
-- @strike
-- A refusal of a cost of 1 or more is a strike (a refused peek is not), counted in a window
-- of `within` from the first one, while now < its end:
-- '<window end µs> <strikes>'. The strike reaching `after` bans the key, and is answered
-- as the ban; the strikes are forgotten, the bans remembered ('<forget at µs> <bans>')
-- until `remembered` after the ban ends. Every key is read before any is written, so an
-- unreadable one (BAD, or another type's WRONGTYPE) fails the call having written nothing.
if allowed == 0 and cost > 0 then
  local pen_after, pen_within, pen_ban = {q1}, {q2}, {q3}
  local pen_growth, pen_max, pen_remembered = {q4}, {q5}, {q6}
  local pen_end, pen_strikes = 0, 0
  local pen_stored = redis.call('GET', KEYS[3])
  if pen_stored then
    local e, k = string.match(pen_stored, '^(%d+) (%d+)$')
    if not e then return redis.error_reply(BAD) end
    pen_end, pen_strikes = tonumber(e), tonumber(k)
  end
  local pen_fresh = pen_end <= now
  if pen_fresh then pen_end, pen_strikes = now + pen_within, 0 end
  pen_strikes = pen_strikes + 1
  if pen_strikes < pen_after then
    local pen_value = string.format('%d %d', pen_end, pen_strikes)
    if pen_fresh then
      redis.call('SET', KEYS[3], pen_value, 'PX',
        string.format('%d', math.floor((pen_within + 999) / 1000) + 1 + slack))
    else
      redis.call('SET', KEYS[3], pen_value, 'KEEPTTL')
    end
  else
    local pen_bans = 0
    local pen_known = redis.call('GET', KEYS[4])
    if pen_known then
      local f, k = string.match(pen_known, '^(%d+) (%d+)$')
      if not f then return redis.error_reply(BAD) end
      if tonumber(f) > now then pen_bans = tonumber(k) end
    end
    pen_bans = pen_bans + 1
    -- As Penalty::nth_ban: grow while below the cap, then cut to it.
    local pen_length = pen_ban
    for _ = 2, pen_bans do
      if pen_length >= pen_max or pen_growth == 1 then break end
      pen_length = pen_length * pen_growth
    end
    if pen_length > pen_max then pen_length = pen_max end
    local pen_forget = pen_length + pen_remembered
    redis.call('SET', KEYS[2], string.format('%d', now + pen_length), 'PX',
      string.format('%d', math.floor((pen_length + 999) / 1000) + 1 + slack))
    redis.call('SET', KEYS[4], string.format('%d %d', now + pen_forget, pen_bans), 'PX',
      string.format('%d', math.floor((pen_forget + 999) / 1000) + 1 + slack))
    redis.call('DEL', KEYS[3])
    return string.format('ban %d', pen_length)
  end
end
