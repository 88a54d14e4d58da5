-- The token bucket's charge and refund, as floodwall-core's TokenBucket::adjust, on the
-- tokens owed as of this tick: a charge may owe past the capacity (debt), up to twice it;
-- a refund owes fewer, never fewer than none.
if c > 0 then
  local owing = math.min(owed + c, math.max(owed, 2 * capacity))
  changed = owing ~= owed
  owed = owing
elseif c < 0 and owed > 0 then
  owed = math.max(owed + c, 0)
  changed = true
end
