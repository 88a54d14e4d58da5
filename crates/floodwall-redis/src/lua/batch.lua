-- Several checks of one key (see src/coalesce.rs), in arrival order, at one instant, exactly
-- as that many single calls would be one after another at the same `now`, with the state
-- written once; the algorithm's `@step` and `@save` sections are pasted in where marked.
-- ARGV[1] (the prelude's `cost`) is the number of checks; ARGV[2..4]: the algorithm's
-- parameters, padded with 0 (a batch's text never has them written in); ARGV[{now}]: now,
-- or '' for the server's clock (src/script.rs writes its index); after it, the checks'
-- costs. The reply is four integers per check, concatenated:
-- {allowed, remaining, retry, reset, ...}.
local out, wrote = {}, false
for i = 1, cost do
  local c = tonumber(ARGV[{now} + i])
  local allowed, remaining, retry, reset
-- {step}
  if allowed == 1 and c > 0 then wrote = true end
  out[#out + 1] = allowed
  out[#out + 1] = remaining
  out[#out + 1] = retry
  out[#out + 1] = reset
end
if wrote then
-- {save}
end
return out
