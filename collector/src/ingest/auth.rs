//! Bearer-token authentication, checked before any decoding.

/// The expected token, when authentication is on.
#[derive(Clone)]
pub struct BearerAuth {
    token: Option<Vec<u8>>,
}

impl std::fmt::Debug for BearerAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the token.
        f.debug_struct("BearerAuth")
            .field("enabled", &self.token.is_some())
            .finish()
    }
}

impl BearerAuth {
    /// Authentication with this token; `None` lets every request in.
    pub fn new(token: Option<String>) -> Self {
        Self {
            token: token.map(String::into_bytes),
        }
    }

    /// Whether an `Authorization` header value is acceptable.
    pub fn allows(&self, authorization: Option<&[u8]>) -> bool {
        let Some(expected) = &self.token else {
            return true;
        };
        let Some(presented) = authorization.and_then(|value| value.strip_prefix(b"Bearer ")) else {
            return false;
        };
        constant_time_eq(presented, expected)
    }
}

/// Compares in time that depends only on the lengths, not on where the bytes differ.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let mut difference = a.len() ^ b.len();
    for index in 0..a.len().max(b.len()) {
        let x = a.get(index).copied().unwrap_or(0);
        let y = b.get(index).copied().unwrap_or(0);
        difference |= usize::from(x ^ y);
    }
    difference == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_exact_bearer_token_passes() {
        let auth = BearerAuth::new(Some("s3cret".into()));
        assert!(auth.allows(Some(b"Bearer s3cret")));
        for bad in [
            &b"Bearer s3cre"[..],
            b"Bearer s3cret2",
            b"bearer s3cret",
            b"s3cret",
            b"",
        ] {
            assert!(
                !auth.allows(Some(bad)),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
        assert!(!auth.allows(None));
        assert!(BearerAuth::new(None).allows(None));
        assert!(!format!("{auth:?}").contains("s3cret"));
    }
}
