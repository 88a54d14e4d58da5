-- floodwall: prepended to every algorithm's script (see src/script.rs).
-- KEYS[1]: the one key a decision touches. ARGV[1]: now in microseconds since the Unix epoch,
-- or '' to read the server's clock; ARGV[2]: the cost; ARGV[3..]: the algorithm's parameters.
-- All arithmetic is on integers below 2^53, where Lua's doubles are exact (µs timestamps are
-- about 2^51). Integers are written with string.format('%d'): tostring would use '%.14g'.
-- Replies are {allowed (1/0), remaining, retry_after µs, reset_after µs}.
local now, slack
if ARGV[1] == '' then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
  slack = 0
else
  -- An explicit time (tests, simulations) runs ahead of or behind the server's expiry clock,
  -- so its keys live one minute longer than their state needs.
  now = tonumber(ARGV[1])
  slack = 60000
end
local cost = tonumber(ARGV[2])

-- A PX argument: the state's remaining life (µs > 0) in whole milliseconds, rounded up.
local function px(us)
  return string.format('%d', math.floor((us + 999) / 1000) + slack)
end

local function bad_state()
  return redis.error_reply('FLOODWALL unreadable rate-limit state; delete the key or reset it')
end
