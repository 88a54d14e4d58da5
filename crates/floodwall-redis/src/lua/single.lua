-- One check of `cost`; the algorithm's `@step`, `@save` and `@reply` sections are pasted in
-- where marked (see src/script.rs), so a single check builds no closure. A denial or a peek
-- writes nothing. Without a `@reply` of its own, the answer is one string of four integers,
-- 'allowed remaining retry_after_us reset_after_us': a string costs Redis less to send
-- than a table does.
local c = cost
local allowed, remaining, retry, reset
-- {step}
if allowed == 1 and c > 0 then
-- {save}
end
-- {reply}
