-- The sections lua/all.lua runs when some of its policies have a penalty (src/script.rs
-- pastes them where all.lua marks them; without a penalty its text is unchanged). The
-- rules are docs/penalties.md's: a key banned under any policy records nothing in any, its
-- banned policies answer their ban and the others a peek; otherwise the quotas decide,
-- and each penalized policy whose own decision refused counts a strike (a strike that bans
-- makes that policy's answer the ban). KEYS[1..m] are the rate keys; each penalized
-- policy's three keys follow them (src/all.rs), read as ALL_KEYS. `banned[i]` and
-- `strike[i]` are lua/penalty.lua's sections in functions of their own, answering
-- 'ban <remainder>', nothing, or the error met. A strike's error after another policy's
-- strike was written leaves that one written (only a key of another type does that).
-- @penalty keys
local ALL_KEYS = KEYS
local KEYS = {unpack(ALL_KEYS, 1, {m})}
local banned, strike = {}, {}
-- @bans
local pen_out, pen_any = {}, false
for i = 1, #KEYS do
  if banned[i] then
    local b = banned[i]()
    if type(b) == 'table' then return b end
    if b then pen_out[i], pen_any = b, true end
  end
end
if pen_any then
  for i = 1, #KEYS do
    if not pen_out[i] then
      local allowed, _, peek = decide[i](0)
      if type(allowed) == 'table' then return allowed end
      pen_out[i] = peek()
    end
  end
  return pen_out
end
-- @strikes
local pen_struck = {}
for i = 1, #KEYS do
  if strike[i] then
    local b = strike[i](decided[i][1])
    if type(b) == 'table' then return b end
    pen_struck[i] = b
  end
end
-- @struck
for i, b in pairs(pen_struck) do out[i] = b end
