-- floodwall: prepended to every algorithm's script (see src/script.rs).
-- KEYS[1]: the one key a decision touches (a batch: see batch.lua). ARGV[1]: the cost (a
-- batch: how many checks; absent: 1). The algorithm's parameters (placeholders p1 to p3 in braces) are either written
-- into the script as numbers (a script per parameter set: no argument to send and parse) or
-- read from ARGV[2..4] (src/script.rs says which). Then, optionally, now in microseconds
-- since the Unix epoch (absent or '' reads the server's clock; src/script.rs writes its
-- index here).
-- All arithmetic is on integers below 2^53, where Lua's doubles are exact (µs timestamps are
-- about 2^51). Integers are written with string.format('%d'): tostring would use '%.14g',
-- and a number handed to redis.call is formatted with '%.17g', which costs more.
-- No closure is built and no table returned on a single check's path: each costs Redis
-- more than the arithmetic (BENCHMARKS.md §2 measures it).
-- Every argument costs Redis a string to build and Lua a `tonumber` (a strtod): a check of
-- cost 1 on the server's clock sends none. `cost_arg` is the cost as text, for a command.
local cost, cost_arg = 1, '1'
if ARGV[1] then cost, cost_arg = tonumber(ARGV[1]), ARGV[1] end
local now, slack = ARGV[{now}], 0
if now and now ~= '' then
  -- An explicit time (tests, simulations) runs ahead of or behind the server's expiry clock,
  -- so its keys live one minute longer than their state needs.
  now, slack = tonumber(now), 60000
else
  local t = redis.call('TIME')
  now = t[1] * 1000000 + t[2]
end
-- A key's TTL is renewed only when the time its state must live until moves to a later
-- cell of a grid of a quarter of the longest such span (whole milliseconds, at least 1): an
-- admission that stays in the cell keeps the TTL (KEEPTTL, or GCRA's INCRBY), which costs
-- Redis less than PX.
-- The cell is worked out from the state read, so nothing more is stored; a key lives at
-- most a cell (+ 1 ms for the server's millisecond clock) longer than its state needs.
local BAD = 'FLOODWALL unreadable rate-limit state; delete the key or reset it'
-- 2^53: integers up to it are exact in Lua's doubles; a packed answer must stay below it.
local EXACT = 9007199254740992
