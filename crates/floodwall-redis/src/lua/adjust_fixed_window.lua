-- The fixed window's charge and refund, as floodwall-core's FixedWindow::adjust, on the
-- key's current window (an ended window loads as empty: nothing to refund): a charge fills
-- it up to the limit, never past (a window carries no debt); a refund gives back what it
-- counted, never more.
if c > 0 then
  local filled = math.min(used + c, math.max(limit, used))
  changed = filled ~= used
  used = filled
elseif c < 0 and used > 0 then
  used = math.max(used + c, 0)
  changed = true
end
