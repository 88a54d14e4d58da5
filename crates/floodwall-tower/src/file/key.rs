//! The key a policy file names: one of this crate's extractors, chosen at run time.

use http::Request;
use http::request::Parts;
use ipnet::IpNet;

use crate::Key;
use crate::extract::{ClientIp, ExtractKey, ForwardedHeader, Global, HeaderKey, KeyError, PeerIp};

/// The key extractor a policy file's `[key]` table describes: the peer's IP (the default),
/// the client's IP behind trusted proxies, a header's value, a bearer token, or one key
/// for everyone. It extracts exactly as the extractor it names does.
#[derive(Clone, Debug)]
pub struct FileKey(Kind);

#[derive(Clone, Debug)]
enum Kind {
    PeerIp(PeerIp),
    ClientIp(ClientIp),
    Header(HeaderKey),
    Global,
}

/// What `[key]` said, validated: compared on reload (a different key needs a restart,
/// since every count would move to new keys) and turned into a [`FileKey`].
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub(super) struct KeySpec {
    pub(super) kind: KeyKind,
    pub(super) trusted: Vec<IpNet>,
    pub(super) forwarded: bool,
    pub(super) header: Option<http::HeaderName>,
    pub(super) salt: Option<String>,
    pub(super) ipv4_prefix: Option<u8>,
    pub(super) ipv6_prefix: Option<u8>,
}

/// The kinds of key a file can name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub(super) enum KeyKind {
    #[default]
    PeerIp,
    ClientIp,
    Header,
    Bearer,
    Global,
}

impl KeyKind {
    /// Every kind with its name in the file.
    pub(super) const ALL: [(&'static str, KeyKind); 5] = [
        ("peer_ip", KeyKind::PeerIp),
        ("client_ip", KeyKind::ClientIp),
        ("header", KeyKind::Header),
        ("bearer", KeyKind::Bearer),
        ("global", KeyKind::Global),
    ];
}

impl KeySpec {
    pub(super) fn extractor(&self) -> FileKey {
        // Each prefix length the file gives, set on the extractor.
        let (v4, v6) = (self.ipv4_prefix, self.ipv6_prefix);
        let kind = match self.kind {
            KeyKind::PeerIp => {
                let peer = v4.into_iter().fold(PeerIp::new(), PeerIp::ipv4_prefix);
                Kind::PeerIp(v6.into_iter().fold(peer, PeerIp::ipv6_prefix))
            }
            KeyKind::ClientIp => {
                let mut client = ClientIp::new(self.trusted.iter().copied());
                if self.forwarded {
                    client = client.header(ForwardedHeader::Forwarded);
                }
                let client = v4.into_iter().fold(client, ClientIp::ipv4_prefix);
                Kind::ClientIp(v6.into_iter().fold(client, ClientIp::ipv6_prefix))
            }
            KeyKind::Header | KeyKind::Bearer => {
                let key = match &self.header {
                    Some(name) if self.kind == KeyKind::Header => HeaderKey::new(name.clone()),
                    _ => HeaderKey::bearer(),
                };
                let salt = self.salt.as_ref().map(String::as_bytes);
                Kind::Header(salt.into_iter().fold(key, HeaderKey::salt))
            }
            KeyKind::Global => Kind::Global,
        };
        FileKey(kind)
    }
}

impl ExtractKey for FileKey {
    fn extract(&self, req: &Parts, key: &mut Key) -> Result<(), KeyError> {
        match &self.0 {
            Kind::PeerIp(e) => e.extract(req, key),
            Kind::ClientIp(e) => e.extract(req, key),
            Kind::Header(e) => e.extract(req, key),
            Kind::Global => Global.extract(req, key),
        }
    }

    fn extract_request<B>(&self, req: &Request<B>, key: &mut Key) -> Option<Result<(), KeyError>> {
        match &self.0 {
            Kind::PeerIp(e) => e.extract_request(req, key),
            Kind::ClientIp(e) => e.extract_request(req, key),
            Kind::Header(e) => e.extract_request(req, key),
            Kind::Global => Global.extract_request(req, key),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::extract::tests::{agrees, requests};
    use crate::file::PolicyFile;

    /// A layer given a file's key without its routes (no chooser) reads the key from the
    /// whole request: every kind answers there, and as it does from the parts.
    #[test]
    fn every_kind_answers_from_the_whole_request_as_from_its_parts() {
        let policy = "[[policy]]\nname = \"p\"\nquota = \"1/s\"\n";
        let keys = [
            "",
            "[key]\nkind = \"peer_ip\"\nipv4_prefix = 24\n",
            "[key]\nkind = \"client_ip\"\ntrusted_proxies = [\"10.0.0.0/8\"]\n",
            "[key]\nkind = \"header\"\nheader = \"x-api-key\"\nsalt = \"s\"\n",
            "[key]\nkind = \"bearer\"\n",
            "[key]\nkind = \"global\"\n",
        ];
        for text in keys {
            let file = PolicyFile::parse(&format!("{text}{policy}"), "key.toml").unwrap();
            let key = file.key();
            assert!(agrees(&key), "{text}");
            // From the request with everything, every kind finds its key.
            let mut found = Key::new();
            let full = requests().remove(0).into_parts().0;
            key.extract(&full, &mut found).unwrap();
            assert!(!found.is_empty(), "{text}");
        }
    }
}
