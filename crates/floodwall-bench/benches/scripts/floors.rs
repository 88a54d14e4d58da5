//! The floors of a batch, for the batch rows (`batch.rs`): the commands the store's batch
//! script runs for batches of keys that all hold state (`TIME`, one `MGET`, a write per key,
//! an integer per key back), with no decision logic, written in several ways so that what
//! each command costs per key is seen. Each is called as the batch is (`KEYS`: the batch's
//! keys; the same `ARGV`, unread).

/// The floor of an admitted batch with a `KEEPTTL` write: the commands the store's batch
/// runs when every key holds state, with no decision logic; one integer per key back.
pub(crate) const FLOOR_KEEPTTL: &str = "local t = redis.call('TIME')\n\
    local now = t[1] * 1000000 + t[2]\n\
    local values = redis.call('MGET', unpack(KEYS))\n\
    local out = {}\n\
    for j = 1, #KEYS do\n\
      redis.call('SET', KEYS[j], '1700000000000000', 'KEEPTTL')\n\
      out[j] = 1\n\
    end\n\
    return out";

/// The floor with the new-TTL write (`PX`) on every key: what a new TTL cell costs.
pub(crate) const FLOOR_PX: &str = "local t = redis.call('TIME')\n\
    local now = t[1] * 1000000 + t[2]\n\
    local values = redis.call('MGET', unpack(KEYS))\n\
    local out = {}\n\
    for j = 1, #KEYS do\n\
      redis.call('SET', KEYS[j], '1700000000000000', 'PX', '600000')\n\
      out[j] = 1\n\
    end\n\
    return out";

/// The floor with the write an `INCRBY`, which keeps the TTL, adds to an integer in place
/// and answers an integer.
pub(crate) const FLOOR_INCRBY: &str = "local t = redis.call('TIME')\n\
    local now = t[1] * 1000000 + t[2]\n\
    local values = redis.call('MGET', unpack(KEYS))\n\
    local out = {}\n\
    for j = 1, #KEYS do\n\
      redis.call('INCRBY', KEYS[j], '1')\n\
      out[j] = 1\n\
    end\n\
    return out";

/// The floor with no write: what the per-key write's share is.
pub(crate) const FLOOR_READ: &str = "local t = redis.call('TIME')\n\
    local now = t[1] * 1000000 + t[2]\n\
    local values = redis.call('MGET', unpack(KEYS))\n\
    local out = {}\n\
    for j = 1, #KEYS do\n\
      out[j] = 1\n\
    end\n\
    return out";

/// The floor with the write an in-place overwrite: `SETRANGE` keeps the TTL as `KEEPTTL`
/// does, takes no option to parse and answers an integer (SET answers a status, which the
/// script receives as a table).
pub(crate) const FLOOR_SETRANGE: &str = "local t = redis.call('TIME')\n\
    local now = t[1] * 1000000 + t[2]\n\
    local values = redis.call('MGET', unpack(KEYS))\n\
    local out = {}\n\
    for j = 1, #KEYS do\n\
      redis.call('SETRANGE', KEYS[j], '0', '1700000000000000')\n\
      out[j] = 1\n\
    end\n\
    return out";
