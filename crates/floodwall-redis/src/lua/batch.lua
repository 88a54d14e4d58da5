-- Appended after prelude.lua, before an algorithm's *_batch.lua (see src/coalesce.rs).
-- A batch decides several checks of one key, in arrival order, at one instant: exactly as
-- that many calls of the single script would, one after another, at the same `now`.
-- ARGV[2] (the prelude's `cost`) is the number of checks n; ARGV[3..5]: the algorithm's
-- parameters, padded with 0; ARGV[6..5+n]: the checks' costs. The reply is the single
-- script's four integers per check, concatenated: {allowed, remaining, retry, reset, ...}.
local n = cost
local out = {}
local function answer(allowed, remaining, retry, reset)
  out[#out + 1] = allowed
  out[#out + 1] = remaining
  out[#out + 1] = retry
  out[#out + 1] = reset
end
local function cost_of(i) return tonumber(ARGV[5 + i]) end
