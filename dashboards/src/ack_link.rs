//! Signed acknowledgement links, for receivers that cannot call the API: every firing
//! notification carries an `acknowledge_url` annotation that acknowledges that episode of that
//! alert, and nothing else, without a credential.
//!
//! The link names the alert, its labels and the time its episode fired, and carries an
//! HMAC-SHA256 of the three under a key of the dashboards' own (32 random bytes in
//! `<state_dir>/ack-link.key`, made at the first start, readable by the owner only). Opening it
//! (`GET`) shows what it acknowledges and a button; only the button's `POST` acknowledges, so a
//! mail scanner that follows links acknowledges nothing. A link whose signature does not verify
//! is refused with 403; one for an episode that is over, with 410. The acknowledgement is
//! recorded as by [`LINK_USER`].

use std::io::Write as _;
use std::path::{Path, PathBuf};

use candor_query::window::Micros;
use sha2::{Digest as _, Sha256};

use crate::alerts::Labels;

/// Who an acknowledgement through a link is recorded as.
pub const LINK_USER: &str = "notification link";

/// The key file could not be read or made.
#[derive(Debug, thiserror::Error)]
#[error("the acknowledgement link key {path}: {reason}")]
pub struct LinkKeyError {
    /// The key's file.
    pub path: PathBuf,
    /// What went wrong.
    pub reason: String,
}

/// The key links are signed with.
pub struct LinkKey([u8; 32]);

impl std::fmt::Debug for LinkKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the key.
        f.write_str("LinkKey(..)")
    }
}

/// What a link acknowledges.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    /// The rule's name.
    pub name: String,
    /// The instance's labels.
    pub labels: Labels,
    /// When the episode fired.
    pub fired_at: Micros,
}

impl Link {
    /// The link's query string (without `?`), signed with `key`.
    pub fn query(&self, key: &LinkKey) -> String {
        let labels = serde_json::to_string(&self.labels).unwrap_or_default();
        url::form_urlencoded::Serializer::new(String::new())
            .append_pair("name", &self.name)
            .append_pair("labels", &labels)
            .append_pair("fired", &self.fired_at.to_string())
            .append_pair("sig", &key.sign(self))
            .finish()
    }

    /// The link a query string names, when its signature verifies under `key`.
    pub fn verified(query: &str, key: &LinkKey) -> Option<Self> {
        let pairs: Vec<(String, String)> = url::form_urlencoded::parse(query.as_bytes())
            .map(|(name, value)| (name.into_owned(), value.into_owned()))
            .collect();
        let get = |name: &str| {
            pairs
                .iter()
                .find(|(key, _)| key == name)
                .map(|(_, value)| value.as_str())
        };
        let link = Self {
            name: get("name")?.to_owned(),
            labels: serde_json::from_str(get("labels")?).ok()?,
            fired_at: get("fired")?.parse().ok()?,
        };
        key.verifies(&link, get("sig")?).then_some(link)
    }
}

/// Whether a query string carries a link's signature (the access check lets such a request
/// through to [`Link::verified`]).
pub fn is_signed(query: Option<&str>) -> bool {
    query.is_some_and(|query| {
        url::form_urlencoded::parse(query.as_bytes()).any(|(name, _)| name == "sig")
    })
}

impl LinkKey {
    /// Reads `<dir>/ack-link.key`, or makes it (32 bytes of the system's randomness, mode 0600).
    pub fn load_or_create(dir: &Path) -> Result<Self, LinkKeyError> {
        let path = dir.join("ack-link.key");
        let error = |reason: String| LinkKeyError {
            path: path.clone(),
            reason,
        };
        match std::fs::read(&path) {
            Ok(bytes) => {
                let key: [u8; 32] = bytes
                    .try_into()
                    .map_err(|_| error("not 32 bytes: remove it to make a new one".into()))?;
                return Ok(Self(key));
            }
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
            Err(err) => return Err(error(err.to_string())),
        }
        let mut key = [0u8; 32];
        let mut random =
            std::fs::File::open("/dev/urandom").map_err(|err| error(err.to_string()))?;
        std::io::Read::read_exact(&mut random, &mut key).map_err(|err| error(err.to_string()))?;
        std::fs::create_dir_all(dir).map_err(|err| error(err.to_string()))?;
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let mut file = options.open(&path).map_err(|err| error(err.to_string()))?;
        file.write_all(&key).map_err(|err| error(err.to_string()))?;
        file.sync_all().map_err(|err| error(err.to_string()))?;
        Ok(Self(key))
    }

    /// A key of these bytes (tests).
    pub fn from_bytes(bytes: [u8; 32]) -> Self {
        Self(bytes)
    }

    /// The link's signature, hex.
    fn sign(&self, link: &Link) -> String {
        let mac = self.mac(link);
        mac.iter().map(|byte| format!("{byte:02x}")).collect()
    }

    /// Whether `signature` (hex) is the link's, compared in time that depends only on lengths.
    fn verifies(&self, link: &Link, signature: &str) -> bool {
        let expected = self.sign(link);
        expected.len() == signature.len()
            && expected
                .bytes()
                .zip(signature.bytes())
                .fold(0u8, |acc, (a, b)| acc | (a ^ b))
                == 0
    }

    /// HMAC-SHA256 (RFC 2104) of the link's name, labels and firing time, each ended by a zero
    /// byte.
    fn mac(&self, link: &Link) -> [u8; 32] {
        const BLOCK: usize = 64;
        let mut key = [0u8; BLOCK];
        key[..32].copy_from_slice(&self.0);
        let pad = |byte: u8| key.map(|k| k ^ byte);
        let labels = serde_json::to_string(&link.labels).unwrap_or_default();
        let inner: [u8; 32] = Sha256::new()
            .chain_update(pad(0x36))
            .chain_update(link.name.as_bytes())
            .chain_update([0])
            .chain_update(labels.as_bytes())
            .chain_update([0])
            .chain_update(link.fired_at.to_string().as_bytes())
            .chain_update([0])
            .finalize()
            .into();
        Sha256::new()
            .chain_update(pad(0x5c))
            .chain_update(inner)
            .finalize()
            .into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn link() -> Link {
        Link {
            name: "CandorPipelineStale".into(),
            labels: Labels::from([("hop".to_owned(), "collector".to_owned())]),
            fired_at: 1_700_000_000_000_000,
        }
    }

    #[test]
    fn a_signed_link_verifies_and_any_change_to_it_does_not() {
        let key = LinkKey::from_bytes([7; 32]);
        let query = link().query(&key);
        assert!(is_signed(Some(&query)));
        assert_eq!(Link::verified(&query, &key), Some(link()));
        assert_eq!(Link::verified(&query, &LinkKey::from_bytes([8; 32])), None);
        for (from, to) in [
            ("collector", "kafka"),
            ("CandorPipelineStale", "CandorWatchdog"),
            ("1700000000000000", "1700000000000001"),
        ] {
            let tampered = query.replace(from, to);
            assert_ne!(tampered, query);
            assert_eq!(Link::verified(&tampered, &key), None, "{tampered}");
        }
        assert_eq!(Link::verified("name=x&labels=%7B%7D&fired=1", &key), None);
        assert!(!is_signed(Some("name=x")));
        assert!(!is_signed(None));
    }

    #[test]
    fn the_key_is_made_once_and_read_back() {
        let dir = std::env::temp_dir().join(format!(
            "candor-dashboards-ack-key-{}-{}",
            std::process::id(),
            line!()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        let made = LinkKey::load_or_create(&dir).unwrap();
        let read = LinkKey::load_or_create(&dir).unwrap();
        assert_eq!(made.0, read.0);
        assert_eq!(format!("{made:?}"), "LinkKey(..)");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
