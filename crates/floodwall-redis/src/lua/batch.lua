-- A batch (see src/coalesce.rs): several checks, of one key or of several, decided at one
-- instant (one TIME), each key's checks in arrival order exactly as that many single calls
-- would be one after another at the same `now`. The algorithm's sections are pasted in
-- where marked; src/script.rs also writes the `{state ...}` lines, from the names on the
-- `@load` marker.
-- ARGV[1] (the prelude's `cost`): the number of checks, n; ARGV[2..4]: the algorithm's
-- parameters, padded with 0 (a batch's text never has them written in); ARGV[{now}]: now,
-- or '' for the server's clock (src/script.rs writes its index); ARGV[6]: the number of
-- keys, nkeys, each named once. The keys: KEYS[1..nkeys]; or, with no key declared (a
-- cluster node's batch, whose keys span slots: see docs/redis.md), the nkeys arguments
-- after ARGV[6]. Then, only when n > nkeys, how many checks each key has; then the checks'
-- costs, key by key, or none when every cost is 1. The answer: n single answers (see
-- src/reply.rs), key by key in the order sent.
-- First every key's state is read, then the checks are decided and the keys written, key
-- by key: every error (a key of another type, an unreadable state, a key this cluster node
-- does not serve) is met while reading, before anything is written, and deciding raises
-- none. A batch that fails has changed nothing, so its checks can be sent again one by one.
-- The sections pasted in share this script's names: they read `key`, `stored`, `c` and the
-- prelude's; the driver's own (`IMPORTING`, `n`, `nkeys`, `at`, `keys`, `counts`,
-- `costs`, `values`, `missing`, `out`, `sent`, `answer`, `changed`) appear in no
-- algorithm's file, so that neither hides the other's (src/script.rs tests it).
local IMPORTING = 'FLOODWALL a batch key may be in a slot this node imports; send it alone'
local n, nkeys, at = cost, tonumber(ARGV[6]), 6
local keys = KEYS
if #keys == 0 then
  keys = {}
  for j = 1, nkeys do keys[j] = ARGV[at + j] end
  at = at + nkeys
end
local counts
if n > nkeys then
  counts = {}
  for j = 1, nkeys do counts[j] = tonumber(ARGV[at + j]) end
  at = at + nkeys
end
local costs = ARGV[at + 1] ~= nil
-- Read. One MGET when the keys are declared (one node, one slot or none); a GET per key
-- otherwise: Redis Cluster refuses a command whose keys span slots, even in a script.
-- MGET reads a key of another type as missing where GET fails on it, so the keys it found
-- missing are counted (EXISTS): a key of another type then fails the batch here, as a
-- single check's GET would, rather than be overwritten.
local values
if #KEYS > 0 then
  values = redis.call('MGET', unpack(keys))
  local missing
  for j = 1, nkeys do
    if not values[j] then
      missing = missing or {}
      missing[#missing + 1] = keys[j]
    end
  end
  if missing and redis.call('EXISTS', unpack(missing)) > 0 then
    for _, k in ipairs(missing) do redis.call('GET', k) end
  end
else
  values = {}
  local missing = false
  for j = 1, nkeys do
    values[j] = redis.call('GET', keys[j])
    if not values[j] then missing = true end
  end
  -- Redis serves a key of a slot this node imports when the call came after ASKING, and
  -- checks no more, the batch declaring no key: a key missing here may then still live on
  -- the node the slot comes from. So while this node imports any slot (its own line of
  -- CLUSTER NODES says `-<-`), a batch with a key missing is refused, having written
  -- nothing: its checks go again one by one, each with its key declared.
  if missing and string.find(redis.call('CLUSTER', 'NODES'), '-<-', 1, true) then
    return redis.error_reply(IMPORTING)
  end
end
-- {state tables}
for j = 1, nkeys do
  local stored = values[j]
-- {load}
-- {keep}
end
-- Decide and write, key by key. `answer` is built once, on the state each key restores.
-- {state locals}
local allowed, remaining, retry, reset
local function answer()
-- {reply}
end
local out, sent = {}, 0
for j = 1, nkeys do
-- {restore}
  local key, changed = keys[j], false
  for _ = 1, counts and counts[j] or 1 do
    sent = sent + 1
    local c = 1
    if costs then c = tonumber(ARGV[at + sent]) end
-- {step}
    if allowed == 1 and c > 0 then changed = true end
    out[sent] = answer()
  end
  if changed then
-- {save}
  end
end
return out
