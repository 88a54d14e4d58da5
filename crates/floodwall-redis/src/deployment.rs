//! Which Redis a store counts on, as a program's options name it (one node, a cluster, a
//! primary behind sentinels), so that every program connects and logs it the same way.

use std::fmt;

use crate::{BuildError, RedisStore, RedisStoreBuilder};

/// Where the Redis is: [`RedisStoreBuilder::connect`] connects to it, and its `Display`
/// lists its URLs with any `user:password@` left out, for logs and error messages.
///
/// ```
/// use floodwall_redis::Deployment;
///
/// let cluster = Deployment::Cluster(vec!["redis://admin:secret@10.0.0.1:7000/".into()]);
/// assert_eq!(cluster.to_string(), "redis://***@10.0.0.1:7000/");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Deployment {
    /// One node (`redis://[user:password@]host[:port][/db]`), over one multiplexed
    /// connection ([`RedisStoreBuilder::multiplexed`]).
    Node(String),
    /// A Redis Cluster, reached through any of these nodes ([`RedisStoreBuilder::cluster`]).
    Cluster(Vec<String>),
    /// The primary these sentinels name for `service` ([`RedisStoreBuilder::sentinel`]).
    Sentinel {
        /// The sentinels' URLs.
        sentinels: Vec<String>,
        /// Their name for the primary (`sentinel monitor <name> ...`).
        service: String,
    },
}

impl RedisStoreBuilder {
    /// Connects to `deployment` as its variant's method does.
    pub async fn connect(self, deployment: &Deployment) -> Result<RedisStore, BuildError> {
        match deployment {
            Deployment::Node(url) => self.multiplexed(url).await,
            Deployment::Cluster(urls) => self.cluster(urls).await,
            Deployment::Sentinel { sentinels, service } => self.sentinel(sentinels, service).await,
        }
    }
}

impl fmt::Display for Deployment {
    /// The URLs, comma-separated, credentials left out; a sentinel's service after them.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let list = |f: &mut fmt::Formatter<'_>, urls: &[String]| {
            for (i, url) in urls.iter().enumerate() {
                let sep = if i == 0 { "" } else { "," };
                write!(f, "{sep}{}", Redacted(url))?;
            }
            Ok(())
        };
        match self {
            Self::Node(url) => write!(f, "{}", Redacted(url)),
            Self::Cluster(urls) => list(f, urls),
            Self::Sentinel { sentinels, service } => {
                list(f, sentinels)?;
                write!(f, " service {service}")
            }
        }
    }
}

/// A URL with any `user:password@` after its scheme shown as `***@`.
struct Redacted<'a>(&'a str);

impl fmt::Display for Redacted<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let url = self.0;
        let Some(after_scheme) = url.find("://").map(|i| i + 3) else {
            return f.write_str(url);
        };
        match url[after_scheme..].rfind('@') {
            Some(at) => write!(
                f,
                "{}***@{}",
                &url[..after_scheme],
                &url[after_scheme + at + 1..]
            ),
            None => f.write_str(url),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_are_never_shown() {
        let shown = |url: &str| Deployment::Node(url.to_owned()).to_string();
        assert_eq!(shown("redis://u:p@h:1/0"), "redis://***@h:1/0");
        assert_eq!(shown("rediss://:p@w@h/"), "rediss://***@h/");
        assert_eq!(shown("redis://h:1/"), "redis://h:1/");
        assert_eq!(shown("h:1"), "h:1");
        let sentinel = Deployment::Sentinel {
            sentinels: vec!["redis://a:1/".into(), "redis://x:y@b:2/".into()],
            service: "m".into(),
        };
        assert_eq!(
            sentinel.to_string(),
            "redis://a:1/,redis://***@b:2/ service m"
        );
    }
}
