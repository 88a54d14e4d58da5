//! What one call sends, and how it is sent on a connection: the part of a call that every
//! connection kind shares (`crate::connection` and the Sentinel kind of
//! `crate::sentinel` both send through [`exec`]).

use redis::aio::ConnectionLike;
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr};
use redis::{
    Cmd, ErrorKind, FromRedisValue, RedisError, RedisResult, ScriptInvocation, ServerErrorKind,
    Value,
};

/// What one call sends.
pub(crate) enum Op<'a> {
    Script(&'a ScriptInvocation<'a>),
    Cmd(&'a Cmd),
    /// An `EVALSHA` that declares no key, run on the cluster node serving `route`'s slot
    /// (elsewhere, on the one server), loading its script `text` on `NOSCRIPT`.
    Keyless {
        evalsha: &'a Cmd,
        text: &'a str,
        route: &'a [u8],
    },
}

/// Sends `op` on `con`, loading a keyless call's script on `NOSCRIPT` (a script
/// invocation does so itself).
pub(crate) async fn exec<C: ConnectionLike, T: FromRedisValue>(
    con: &mut C,
    op: Op<'_>,
) -> RedisResult<T> {
    match op {
        Op::Script(inv) => inv.invoke_async(con).await,
        Op::Cmd(cmd) => cmd.query_async(con).await,
        Op::Keyless { evalsha, text, .. } => match evalsha.query_async(con).await {
            Err(e) if no_script(&e) => {
                load(text).query_async::<()>(con).await?;
                evalsha.query_async(con).await
            }
            other => other,
        },
    }
}

/// A keyless `EVALSHA` on the cluster node serving `route`'s slot (redis-rs would send a
/// call without keys to any node).
pub(crate) async fn exec_on_node<T: FromRedisValue>(
    con: &mut ClusterConnection,
    evalsha: &Cmd,
    text: &str,
    route: &[u8],
) -> RedisResult<T> {
    let node = || {
        RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(Route::with_key(
            route,
            SlotAddr::Master,
        )))
    };
    // `route_command` hands a server's error reply back as a value: made an error here.
    let errors = |reply: RedisResult<Value>| match reply? {
        Value::ServerError(e) => Err(RedisError::from(e)),
        value => Ok(value),
    };
    let reply = match errors(con.route_command(evalsha.clone(), node()).await) {
        Err(e) if no_script(&e) => {
            errors(con.route_command(load(text), node()).await)?;
            errors(con.route_command(evalsha.clone(), node()).await)?
        }
        other => other?,
    };
    T::from_redis_value(reply).map_err(Into::into)
}

fn no_script(e: &RedisError) -> bool {
    e.kind() == ErrorKind::Server(ServerErrorKind::NoScript)
}

fn load(text: &str) -> Cmd {
    let mut cmd = redis::cmd("SCRIPT");
    cmd.arg("LOAD").arg(text);
    cmd
}
