-- GCRA's (and the funnel's) charge and refund, as floodwall-core's Gcra::adjust: a charge
-- pushes the TAT forward even past the tolerance (debt), at most one more burst; a refund
-- pulls it back, never before now. The burst is tolerance / interval, exactly.
if c > 0 then
  local base = tat
  if base < now then base = now end
  local units = math.min(c, 2 * tolerance / interval)
  local ceiling = now + 2 * tolerance
  if ceiling < base then ceiling = base end
  local moved = math.min(base + units * interval, ceiling)
  changed = moved ~= tat
  tat = moved
elseif c < 0 and tat > now then
  tat = math.max(tat + c * interval, now)
  changed = true
end
