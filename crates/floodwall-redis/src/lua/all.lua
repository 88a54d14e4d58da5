-- One key under several policies, all or nothing (see src/all.rs). KEYS[i]: policy i's
-- key, every one with the same hash tag (the user key), so one slot: the script runs on a
-- cluster. ARGV, as a single check's: ARGV[1] (the prelude's `cost`): the cost; then the
-- policies' numbers, policy by policy, unless written in; then now, absent or '' for the
-- server's clock (src/script/all.rs writes its index). Every key is read first, then each
-- policy decides on its own state; the keys are written only if every policy allowed. In
-- a refusal, a policy that would have allowed answers as a peek (cost 0) on its state as
-- it stays. The answer: a table of one single answer per policy (see src/reply.rs).
-- Each policy's `@load`, `@step`, `@save` and `@reply` sections, with its parameters
-- written in or read from ARGV, are pasted into a function of its own where marked
-- (src/script/all.rs), so that two policies' names never meet; `decide[i](c)` answers
-- allowed, then functions writing the state and giving the answer, or the error `@load`
-- met.
-- {penalty keys}
local values = {}
for i = 1, #KEYS do values[i] = redis.call('GET', KEYS[i]) end
local decide = {}
-- {policies}
-- {bans}
local decided, every = {}, true
for i = 1, #KEYS do
  local allowed, save, reply = decide[i](cost)
  if type(allowed) == 'table' then return allowed end
  decided[i] = {allowed, save, reply}
  if allowed ~= 1 then every = false end
end
-- {strikes}
local out = {}
for i = 1, #KEYS do
  local d = decided[i]
  if every then
    if cost > 0 then d[2]() end
    out[i] = d[3]()
  elseif d[1] == 1 then
    local _, _, peek = decide[i](0)
    out[i] = peek()
  else
    out[i] = d[3]()
  end
end
-- {struck}
return out
