-- One check of `cost` on KEYS[1]; the algorithm's `@load`, `@step`, `@save` and `@reply`
-- sections are pasted in where marked (see src/script.rs), so a single check builds no
-- closure. A denial or a peek writes nothing. The answer is a scalar (see src/reply.rs): a
-- table costs Redis more to send than the decision's arithmetic.
-- {ban}
local key = KEYS[1]
local stored = redis.call('GET', key)
-- {load}
local c = cost
local allowed, remaining, retry, reset
-- {step}
-- {strike}
if allowed == 1 and c > 0 then
-- {save}
end
-- {reply}
