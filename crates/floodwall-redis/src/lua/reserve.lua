-- Books the earliest slot of one request on KEYS[1] (see src/reserve.rs): the algorithm's
-- `@load`, then its `@step` at now. Admitted: as a single check. Refused with a retry of at
-- most the wait asked for (the argument after the time, µs): the request is booked at its
-- slot, `now + retry`, by running the parameters' section (what it derives from now, such
-- as the token bucket's tick, moves with it), the load and the step again at that instant,
-- where they admit it, and saving what that admission leaves: exactly what the request
-- arriving then would do, so later requests queue behind it. Its key's TTL counts from the
-- server's now, so the slot's lead is added to the slack. Never coalesced. The reply is
-- the table {allowed, remaining, retry, reset, wait, the state as stored (the ticket a
-- cancellation compares)}; durations in µs from now.
-- {ban}
local key = KEYS[1]
local stored = redis.call('GET', key)
-- {load}
local c = cost
local max_wait = tonumber(ARGV[{now} + 1])
local allowed, remaining, retry, reset
local wait, ticket = 0, ''
-- {step}
if allowed == 0 and c > 0 and retry <= max_wait then
  wait = retry
  now = now + wait
  slack = slack + math.floor((wait + 999) / 1000)
-- {params}
-- {load}
-- {step}
  if allowed ~= 1 then return redis.error_reply('FLOODWALL a slot refused its own request') end
-- {save}
  ticket = redis.call('GET', key)
  remaining, reset = 0, reset + wait
elseif allowed == 1 and c > 0 then
-- {save}
  ticket = redis.call('GET', key)
end
return {allowed, remaining, retry, reset, wait, ticket}
