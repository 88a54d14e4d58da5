-- One check of `cost`; the algorithm's `@step` and `@save` sections are pasted in where
-- marked (see src/script.rs), so a single check builds no closure. A denial or a peek
-- writes nothing.
local c = cost
local allowed, remaining, retry, reset
-- {step}
if allowed == 1 and c > 0 then
-- {save}
end
return {allowed, remaining, retry, reset}
