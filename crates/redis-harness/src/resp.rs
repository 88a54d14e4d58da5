//! A tiny RESP2 client: open a TCP connection, send one command, read one
//! reply. That is all a test harness needs, and it keeps this crate free of
//! an async runtime and of the `redis` crate (whose behaviour is often the
//! very thing under test).

use std::fmt;
use std::io::{self, BufRead, BufReader, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::time::Duration;

/// How long to wait for a TCP connection to a local server.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// Default read/write timeout for one command. Long enough for slow
/// commands such as `DEBUG SLEEP` in tests, short enough that a hung server
/// fails a test instead of hanging it.
pub(crate) const DEFAULT_COMMAND_TIMEOUT: Duration = Duration::from_secs(30);

/// Refuse to allocate for absurd lengths in a corrupt reply.
const MAX_BULK_LEN: usize = 512 * 1024 * 1024;

/// One reply from Redis, decoded from RESP2.
///
/// [`RedisServer::cmd`](crate::RedisServer::cmd) flattens a reply to text,
/// which is what most tests want; this type is for the tests that must tell
/// a nil from an empty string or an error from a value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// A simple string such as `OK` or `PONG` (`+` in RESP).
    Status(String),
    /// An error such as `ERR unknown command` or `NOSCRIPT ...` (`-` in
    /// RESP), without the leading `-`.
    Error(String),
    /// An integer (`:` in RESP), e.g. from `TTL`, `DBSIZE` or `INCR`.
    Integer(i64),
    /// A bulk string (`$` in RESP), raw bytes.
    Bulk(Vec<u8>),
    /// A nil bulk string or nil array, e.g. `GET` of a missing key.
    Nil,
    /// An array (`*` in RESP), e.g. from `KEYS` or `CLUSTER SLOTS`.
    Array(Vec<Reply>),
}

impl Reply {
    /// The integer value, if this is an integer reply, or a status/bulk
    /// string that parses as one (so `GET` of a counter works too).
    pub fn as_integer(&self) -> Option<i64> {
        match self {
            Reply::Integer(n) => Some(*n),
            Reply::Status(s) => s.trim().parse().ok(),
            Reply::Bulk(b) => std::str::from_utf8(b).ok()?.trim().parse().ok(),
            _ => None,
        }
    }

    /// Whether the server answered with an error.
    pub fn is_error(&self) -> bool {
        matches!(self, Reply::Error(_))
    }

    /// Whether the server answered with nil.
    pub fn is_nil(&self) -> bool {
        matches!(self, Reply::Nil)
    }

    /// The elements, if this is an array reply.
    pub fn as_array(&self) -> Option<&[Reply]> {
        match self {
            Reply::Array(items) => Some(items),
            _ => None,
        }
    }
}

/// Text like `redis-cli --raw` prints: statuses, errors and bulk strings
/// as their text (bulk strings lossily decoded as UTF-8), integers in
/// decimal, nil as the empty string, array elements one per line.
impl fmt::Display for Reply {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reply::Status(s) | Reply::Error(s) => f.write_str(s),
            Reply::Integer(n) => write!(f, "{n}"),
            Reply::Bulk(b) => f.write_str(&String::from_utf8_lossy(b)),
            Reply::Nil => Ok(()),
            Reply::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        f.write_str("\n")?;
                    }
                    write!(f, "{item}")?;
                }
                Ok(())
            }
        }
    }
}

/// Send one command to the Redis server on `127.0.0.1:port` over a fresh
/// connection and return its reply.
///
/// A free function (not only a method) so a test can fire a command from
/// another thread, e.g. a `DEBUG SLEEP` that blocks the server while the
/// test thread measures how the code under test copes. A Redis error reply
/// is `Ok(Reply::Error(..))`; `Err` means the connection or protocol failed.
pub fn query<A: AsRef<[u8]>>(port: u16, args: &[A]) -> io::Result<Reply> {
    query_with_timeout(port, args, DEFAULT_COMMAND_TIMEOUT)
}

/// [`query`] with an explicit read/write timeout.
pub(crate) fn query_with_timeout<A: AsRef<[u8]>>(
    port: u16,
    args: &[A],
    timeout: Duration,
) -> io::Result<Reply> {
    if args.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "a Redis command needs at least one argument",
        ));
    }
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let stream = TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT.min(timeout))?;
    stream.set_read_timeout(Some(timeout))?;
    stream.set_write_timeout(Some(timeout))?;
    stream.set_nodelay(true)?;
    (&stream).write_all(&encode(args))?;
    read_reply(&mut BufReader::new(stream))
}

/// Encode a command as a RESP array of bulk strings.
fn encode<A: AsRef<[u8]>>(args: &[A]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for arg in args {
        let arg = arg.as_ref();
        out.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
        out.extend_from_slice(arg);
        out.extend_from_slice(b"\r\n");
    }
    out
}

fn protocol_error(msg: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg.into())
}

/// Read one CRLF-terminated line, without the CRLF.
fn read_line(r: &mut impl BufRead) -> io::Result<Vec<u8>> {
    let mut line = Vec::new();
    r.read_until(b'\n', &mut line)?;
    if !line.ends_with(b"\r\n") {
        return Err(if line.is_empty() {
            io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "connection closed before a reply",
            )
        } else {
            protocol_error("reply line not terminated by CRLF")
        });
    }
    line.truncate(line.len() - 2);
    Ok(line)
}

fn parse_int(bytes: &[u8]) -> io::Result<i64> {
    std::str::from_utf8(bytes)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| protocol_error(format!("bad integer {:?}", String::from_utf8_lossy(bytes))))
}

fn read_reply(r: &mut impl BufRead) -> io::Result<Reply> {
    let line = read_line(r)?;
    let Some((&kind, rest)) = line.split_first() else {
        return Err(protocol_error("empty reply line"));
    };
    let text = || String::from_utf8_lossy(rest).into_owned();
    match kind {
        b'+' => Ok(Reply::Status(text())),
        b'-' => Ok(Reply::Error(text())),
        b':' => parse_int(rest).map(Reply::Integer),
        b'$' => {
            let len = parse_int(rest)?;
            if len < 0 {
                return Ok(Reply::Nil);
            }
            let len = usize::try_from(len)
                .ok()
                .filter(|&l| l <= MAX_BULK_LEN)
                .ok_or_else(|| protocol_error(format!("bulk length {len} too large")))?;
            let mut buf = vec![0; len + 2];
            r.read_exact(&mut buf)?;
            if !buf.ends_with(b"\r\n") {
                return Err(protocol_error("bulk string not terminated by CRLF"));
            }
            buf.truncate(len);
            Ok(Reply::Bulk(buf))
        }
        b'*' => {
            let n = parse_int(rest)?;
            if n < 0 {
                return Ok(Reply::Nil);
            }
            let n = usize::try_from(n)
                .ok()
                .filter(|&n| n <= MAX_BULK_LEN)
                .ok_or_else(|| protocol_error(format!("array length {n} too large")))?;
            let mut items = Vec::with_capacity(n.min(1024));
            for _ in 0..n {
                items.push(read_reply(r)?);
            }
            Ok(Reply::Array(items))
        }
        other => Err(protocol_error(format!(
            "unexpected RESP type byte {:?}",
            char::from(other)
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(bytes: &[u8]) -> io::Result<Reply> {
        read_reply(&mut &bytes[..])
    }

    #[test]
    fn encodes_binary_safe_arrays() {
        assert_eq!(
            encode(&[&b"SET"[..], b"k\r\n", b""]),
            b"*3\r\n$3\r\nSET\r\n$3\r\nk\r\n\r\n$0\r\n\r\n".to_vec()
        );
    }

    #[test]
    fn decodes_every_reply_kind() {
        assert_eq!(parse(b"+OK\r\n").unwrap(), Reply::Status("OK".into()));
        assert_eq!(
            parse(b"-ERR nope\r\n").unwrap(),
            Reply::Error("ERR nope".into())
        );
        assert_eq!(parse(b":-2\r\n").unwrap(), Reply::Integer(-2));
        assert_eq!(parse(b"$-1\r\n").unwrap(), Reply::Nil);
        assert_eq!(parse(b"*-1\r\n").unwrap(), Reply::Nil);
        assert_eq!(
            parse(b"$4\r\na\r\nb\r\n").unwrap(),
            Reply::Bulk(b"a\r\nb".to_vec())
        );
        let nested = parse(b"*2\r\n:1\r\n*1\r\n$1\r\nx\r\n").unwrap();
        assert_eq!(
            nested,
            Reply::Array(vec![
                Reply::Integer(1),
                Reply::Array(vec![Reply::Bulk(b"x".to_vec())])
            ])
        );
        assert_eq!(nested.to_string(), "1\nx");
    }

    #[test]
    fn rejects_garbage() {
        assert!(parse(b"").is_err());
        assert!(parse(b"+OK").is_err());
        assert!(parse(b"?x\r\n").is_err());
        assert!(parse(b"$3\r\nab").is_err());
        assert!(parse(b":x\r\n").is_err());
    }

    #[test]
    fn integer_views() {
        assert_eq!(Reply::Bulk(b"42".to_vec()).as_integer(), Some(42));
        assert_eq!(Reply::Nil.as_integer(), None);
        assert!(Reply::Nil.is_nil());
        assert!(Reply::Error("ERR".into()).is_error());
    }
}
