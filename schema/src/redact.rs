//! Removing credentials from strings before they are recorded anywhere.
//!
//! Targets are URLs more often than not, and URLs carry secrets: user-info
//! (`https://user:pass@host`), signed-URL parameters (`sig=`, `X-Amz-Signature=`) and tokens
//! (`?access_token=`). Everything that becomes an attribute, a record or a log line passes
//! through [`redact_url`] or [`redact_text`] first.

use std::borrow::Cow;

/// What a removed secret is replaced with.
pub const REDACTED: &str = "REDACTED";

/// Parameter names (lower case, `-` read as `_`) that always hold a secret.
const SECRET_PARAMS: &[&str] = &[
    "sig",
    "signature",
    "token",
    "key",
    "apikey",
    "api_key",
    "auth",
    "authorization",
    "password",
    "passwd",
    "pwd",
    "secret",
    "code",
    "jwt",
    "session",
    "sessionid",
    "x_amz_credential",
    "x_goog_credential",
];

/// Fragments that mark a parameter name as secret wherever they appear in it.
const SECRET_FRAGMENTS: &[&str] = &[
    "token",
    "secret",
    "password",
    "signature",
    "api_key",
    "apikey",
    "credential",
];

/// Whether a query parameter with this name holds a secret.
pub fn is_secret_param(name: &str) -> bool {
    let normalised = name.to_ascii_lowercase().replace('-', "_");
    SECRET_PARAMS.contains(&normalised.as_str())
        || SECRET_FRAGMENTS
            .iter()
            .any(|fragment| normalised.contains(fragment))
}

/// Where the user-info of a URL ends: the byte index, in `head` (the text after the first `://`
/// up to the first `?` after it), of the `@` that ends it; `None` when there is none (contract
/// rule REDACT-TARGET, step 1).
///
/// The authority is the head up to its first `/`. When the authority holds an `@`, the user-info
/// ends at its last `@`. When it does not, but it holds a `:` and the rest of the head holds an
/// `@`, a password whose `/` or `#` its client failed to encode (`user:pa/ss@host`,
/// `user:pa#ss@host`) is taken to run to the head's last `@`: a host with a port and an `@`
/// later in its path or fragment (`host:8080/@me`) then loses its host to the redaction, which
/// never shows a password.
///
/// ```
/// use candor_schema::redact::user_info_end;
/// assert_eq!(user_info_end("bob:hunter2@api.example/v1/@me"), Some(11));
/// assert_eq!(user_info_end("bob:pa/ss@api.example/v1"), Some(9));
/// assert_eq!(user_info_end("bob:pa#ss@api.example/v1"), Some(9));
/// assert_eq!(user_info_end("mastodon.example/@me"), None);
/// assert_eq!(user_info_end("api.example:8443/v1"), None);
/// ```
pub fn user_info_end(head: &str) -> Option<usize> {
    let authority = &head[..head.find('/').unwrap_or(head.len())];
    match authority.rfind('@') {
        Some(at) => Some(at),
        None if authority.contains(':') => head.rfind('@'),
        None => None,
    }
}

/// A URL cut into its parts as every reader of URLs in Candor cuts it (contract rule
/// REDACT-TARGET, steps 1 and 2): the user-info first, over the text before the query, so that
/// a `/` or `#` in a password stays with it; then the fragment at the first `#` after it, the
/// query at the first `?` before that, and the host at the first `/`.
///
/// ```
/// use candor_schema::redact::UrlParts;
/// let parts = UrlParts::of("https://bob:p#ss@api.example:8443/v1?q=1#top");
/// assert_eq!(parts.scheme, "https://");
/// assert_eq!(parts.user_info, Some("bob:p#ss"));
/// assert_eq!(parts.host, "api.example:8443");
/// assert_eq!((parts.path, parts.query, parts.fragment), ("/v1", Some("q=1"), Some("top")));
/// // A text without `://` has neither user-info nor host.
/// let parts = UrlParts::of("orders-db?token=x");
/// assert_eq!((parts.scheme, parts.host, parts.path), ("", "", "orders-db"));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UrlParts<'a> {
    /// The scheme with its `://` (`https://`); empty for a text without `://`.
    pub scheme: &'a str,
    /// The user-info, without the `@` that ends it.
    pub user_info: Option<&'a str>,
    /// The host and port (empty for a text without `://`).
    pub host: &'a str,
    /// What follows the host up to the query or the fragment (the whole text before them, for a
    /// text without `://`).
    pub path: &'a str,
    /// The query, without its `?`.
    pub query: Option<&'a str>,
    /// The fragment, without its `#`.
    pub fragment: Option<&'a str>,
}

impl<'a> UrlParts<'a> {
    /// Cuts `raw`.
    pub fn of(raw: &'a str) -> Self {
        // A `://` counts only before the query and the fragment: `db?next=https://x` has none.
        let before_both = &raw[..raw.find(['?', '#']).unwrap_or(raw.len())];
        let (scheme, after) = match before_both.find("://") {
            Some(at) => raw.split_at(at + 3),
            None => ("", raw),
        };
        let head = &after[..after.find('?').unwrap_or(after.len())];
        let (user_info, rest) = match user_info_end(head).filter(|_| !scheme.is_empty()) {
            Some(at) => (Some(&after[..at]), &after[at + 1..]),
            None => (None, after),
        };
        let (before_fragment, fragment) = split_once_keep(rest, '#');
        let (before_query, query) = split_once_keep(before_fragment, '?');
        let (host, path) = if scheme.is_empty() {
            ("", before_query)
        } else {
            before_query.split_at(before_query.find('/').unwrap_or(before_query.len()))
        };
        Self {
            scheme,
            user_info,
            host,
            path,
            query,
            fragment,
        }
    }
}

/// Removes user-info and secret query or fragment parameters from a URL (contract rule
/// REDACT-TARGET).
///
/// Strings that are not URLs pass through unchanged unless they carry a query string.
///
/// ```
/// use candor_schema::redact::redact_url;
/// assert_eq!(
///     redact_url("https://bob:hunter2@api.example.com/v1/search?q=cats&access_token=abc#x"),
///     "https://REDACTED@api.example.com/v1/search?q=cats&access_token=REDACTED#x",
/// );
/// ```
pub fn redact_url(raw: &str) -> Cow<'_, str> {
    let parts = UrlParts::of(raw);
    // User-info that is already `REDACTED` stays as it is: redacting twice replaces nothing.
    let user_info_redacted = parts.user_info.is_some_and(|info| info != REDACTED);
    let query_redacted = parts.query.map(redact_params);
    let fragment_redacted = parts.fragment.map(redact_params);
    let changed = user_info_redacted
        || matches!(&query_redacted, Some(Cow::Owned(_)))
        || matches!(&fragment_redacted, Some(Cow::Owned(_)));
    if !changed {
        return Cow::Borrowed(raw);
    }
    let mut out = String::with_capacity(raw.len());
    out.push_str(parts.scheme);
    if parts.user_info.is_some() {
        out.push_str(REDACTED);
        out.push('@');
    }
    out.push_str(parts.host);
    out.push_str(parts.path);
    if let Some(query) = query_redacted {
        out.push('?');
        out.push_str(&query);
    }
    if let Some(fragment) = fragment_redacted {
        out.push('#');
        out.push_str(&fragment);
    }
    Cow::Owned(out)
}

/// Redacts credentials inside free text, such as an error message or a response body that
/// quotes the request it failed on: URLs (user-info and secret parameters), `Bearer`/`Basic`
/// credentials, and values of secret-named fields (`token=…`, `"api_key": "…"`).
pub fn redact_text(raw: &str) -> Cow<'_, str> {
    if !may_hold_credentials(raw) {
        return Cow::Borrowed(raw);
    }
    redact_text_fully(raw)
}

/// Whether `raw` may hold anything [`redact_text`] removes: every removal needs a `name=` or
/// `name:` field (a URL's `://` included) or an `Authorization` scheme word. Most texts (error
/// types, coverage notes) hold none of these, and pass through without a copy.
fn may_hold_credentials(raw: &str) -> bool {
    let bytes = raw.as_bytes();
    bytes.iter().any(|byte| matches!(byte, b'=' | b':'))
        || bytes
            .windows(5)
            .any(|word| word.eq_ignore_ascii_case(b"basic"))
        || bytes
            .windows(6)
            .any(|word| word.eq_ignore_ascii_case(b"bearer"))
}

/// [`redact_text`] without the check that there is anything to look for.
fn redact_text_fully(raw: &str) -> Cow<'_, str> {
    let mut out = String::with_capacity(raw.len());
    let mut changed = false;
    for (index, word) in raw.split(' ').enumerate() {
        if index > 0 {
            out.push(' ');
        }
        let redacted = if word.contains("://") {
            redact_url(word)
        } else {
            Cow::Borrowed(word)
        };
        changed |= matches!(redacted, Cow::Owned(_));
        out.push_str(&redacted);
    }
    let (out, values_changed) = redact_secret_values(&out);
    if changed || values_changed {
        Cow::Owned(out)
    } else {
        Cow::Borrowed(raw)
    }
}

/// Characters that end a secret value in free text.
fn ends_value(c: char) -> bool {
    c.is_whitespace() || matches!(c, '"' | '\'' | '&' | ',' | ';' | '}' | ']' | ')' | '<')
}

/// Replaces the value after a secret-named field (`name=`, `name:`, `"name": "`) or after the
/// scheme word of an `Authorization` credential (`Bearer `, `Basic `).
fn redact_secret_values(text: &str) -> (String, bool) {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut changed = false;
    let mut at = 0;
    while at < chars.len() {
        let is_name_char = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
        if !is_name_char(chars[at]) {
            out.push(chars[at]);
            at += 1;
            continue;
        }
        let start = at;
        while at < chars.len() && is_name_char(chars[at]) {
            at += 1;
        }
        let name: String = chars[start..at].iter().collect();
        out.push_str(&name);
        let lower = name.to_ascii_lowercase();
        // Where the value starts, if this name introduces one.
        let mut value_at = at;
        let introduces = if lower == "bearer" || lower == "basic" {
            let spaces = chars[at..].iter().take_while(|c| **c == ' ').count();
            value_at = at + spaces;
            spaces > 0
        } else if is_secret_param(&name) {
            let mut cursor = at;
            if chars.get(cursor) == Some(&'"') || chars.get(cursor) == Some(&'\'') {
                cursor += 1;
            }
            let separator = matches!(chars.get(cursor), Some('=' | ':'));
            if separator {
                cursor += 1;
                while matches!(chars.get(cursor), Some(' ' | '"' | '\'')) {
                    cursor += 1;
                }
                value_at = cursor;
            }
            separator
        } else {
            false
        };
        // `Authorization: Bearer x`: keep the scheme word, hide what follows it.
        let word_len = chars[value_at..]
            .iter()
            .take_while(|c| is_name_char(**c))
            .count();
        let word: String = chars[value_at..value_at + word_len].iter().collect();
        let scheme = word.eq_ignore_ascii_case("bearer") || word.eq_ignore_ascii_case("basic");
        if introduces && scheme && chars.get(value_at + word_len) == Some(&' ') {
            value_at += word_len;
            value_at += chars[value_at..].iter().take_while(|c| **c == ' ').count();
        }
        let value_end = value_at
            + chars[value_at..]
                .iter()
                .take_while(|c| !ends_value(**c))
                .count();
        if !introduces || value_end == value_at {
            continue;
        }
        out.extend(&chars[at..value_at]);
        out.push_str(REDACTED);
        // A value that is already `REDACTED` is no secret removed: redacting twice changes
        // nothing.
        changed |= !chars[value_at..value_end]
            .iter()
            .copied()
            .eq(REDACTED.chars());
        at = value_end;
    }
    (out, changed)
}

fn split_once_keep(raw: &str, separator: char) -> (&str, Option<&str>) {
    match raw.split_once(separator) {
        Some((head, tail)) => (head, Some(tail)),
        None => (raw, None),
    }
}

fn redact_params(params: &str) -> Cow<'_, str> {
    // A secret whose value is already `REDACTED` is left as it is.
    let secret = |pair: &str| {
        pair.split_once('=').is_some_and(|(name, value)| {
            value != REDACTED && is_secret_param(&percent_decode_lossy(name))
        })
    };
    if !params.split('&').any(secret) {
        return Cow::Borrowed(params);
    }
    let pairs: Vec<String> = params
        .split('&')
        .map(|pair| match pair.split_once('=') {
            Some((name, _)) if secret(pair) => format!("{name}={REDACTED}"),
            _ => pair.to_owned(),
        })
        .collect();
    Cow::Owned(pairs.join("&"))
}

/// Decodes `%XX` escapes so that `X%2DAmz%2DSignature` is recognised; invalid escapes stay as
/// they are.
fn percent_decode_lossy(raw: &str) -> String {
    let bytes = raw.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut at = 0;
    while at < bytes.len() {
        let escaped = (bytes[at] == b'%')
            .then(|| bytes.get(at + 1..at + 3))
            .flatten()
            .and_then(|hex| std::str::from_utf8(hex).ok())
            .and_then(|hex| u8::from_str_radix(hex, 16).ok());
        match escaped {
            Some(byte) => {
                out.push(byte);
                at += 3;
            }
            None => {
                out.push(bytes[at]);
                at += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        /// The quick check before redacting free text never lets a credential through: on texts
        /// built from the words and marks that redaction looks for, the answer is the same as
        /// redacting fully.
        #[test]
        fn the_quick_check_changes_no_answer(
            text in "(bearer|Basic|BEARER |token|api-key|password|x|q|=|:|://|@|\\?|&| |\"|'){0,14}"
        ) {
            prop_assert_eq!(redact_text(&text), redact_text_fully(&text));
        }
    }

    #[test]
    fn removes_every_planted_secret() {
        let cases = [
            (
                "https://user:pass@host.example/a",
                "https://REDACTED@host.example/a",
            ),
            (
                "https://s3.example/b/k?X-Amz-Signature=abc&X-Amz-Credential=AK%2F1&x=1",
                "https://s3.example/b/k?X-Amz-Signature=REDACTED&X-Amz-Credential=REDACTED&x=1",
            ),
            (
                "https://blob.example/c?sv=2020&sig=zzz",
                "https://blob.example/c?sv=2020&sig=REDACTED",
            ),
            (
                "http://h/p?api_key=k1&q=ok#access_token=t2",
                "http://h/p?api_key=REDACTED&q=ok#access_token=REDACTED",
            ),
            (
                "http://h/p?X%2DAmz%2DSignature=s",
                "http://h/p?X%2DAmz%2DSignature=REDACTED",
            ),
        ];
        for (raw, want) in cases {
            assert_eq!(redact_url(raw), want, "{raw}");
        }
    }

    /// What is already redacted is left as it is: a second pass replaces nothing, so a receiver
    /// that redacts what an adapter redacted counts no secret twice.
    /// A password's `/`, `@`, `:` or `#` that its client did not encode stays with the password,
    /// for the redaction and for every other reader of a URL's host.
    #[test]
    fn a_password_with_a_slash_an_at_a_colon_or_a_hash_is_removed_whole() {
        let cases = [
            (
                "https://bob:pa/ss@api.example/v1",
                "https://REDACTED@api.example/v1",
            ),
            (
                "https://bob:p@ss@api.example/v1",
                "https://REDACTED@api.example/v1",
            ),
            (
                "https://bob:pa:ss@api.example/v1",
                "https://REDACTED@api.example/v1",
            ),
            (
                "https://bob:12#34@api.example/v1?token=x#frag",
                "https://REDACTED@api.example/v1?token=REDACTED#frag",
            ),
            // A host with a port and an `@` later on is taken for user-info: hidden, never shown.
            ("https://api.example:8443/p#a@b", "https://REDACTED@b"),
            ("https://api.example/p#a@b", "https://api.example/p#a@b"),
            (
                "orders-db?next=https://bob:pw@x",
                "orders-db?next=https://bob:pw@x",
            ),
        ];
        for (raw, want) in cases {
            assert_eq!(redact_url(raw), want, "{raw}");
        }
        let parts = UrlParts::of("https://bob:12#34@api.example:8443/v1#top");
        assert_eq!(
            (parts.user_info, parts.host, parts.fragment),
            (Some("bob:12#34"), "api.example:8443", Some("top"))
        );
    }

    #[test]
    fn redacting_twice_replaces_nothing() {
        for raw in [
            "https://bob:pw@api.example/v1?q=1&access_token=abc#sig=x",
            "orders-db?token=x",
            "HTTP 401 from https://u:p@h/x?key=1: Authorization: Bearer abc.def, api_key=\"k\"",
        ] {
            let once = redact_text(raw).into_owned();
            assert_ne!(once, raw);
            assert!(
                matches!(redact_text(&once), Cow::Borrowed(_)),
                "text: {raw} -> {once}"
            );
            let url = redact_url(raw).into_owned();
            assert!(
                matches!(redact_url(&url), Cow::Borrowed(_)),
                "url: {raw} -> {url}"
            );
        }
    }

    #[test]
    fn leaves_clean_urls_and_plain_names_untouched() {
        for raw in [
            "https://api.example.com/v1/search?q=cats&page=2",
            "search-index",
            "../../etc/passwd",
            "mailto:someone@example.com",
        ] {
            assert!(matches!(redact_url(raw), Cow::Borrowed(_)), "{raw}");
        }
    }

    #[test]
    fn redacts_secret_values_in_json_and_form_text() {
        let cases = [
            r#"{"error":"bad token","echo":"Bearer abc.def.ghi"}"#,
            r#"{"access_token": "abc.def.ghi", "ok": true}"#,
            "password=abc.def.ghi&user=bob",
            "Authorization: Basic abc.def.ghi",
            "x-api-key: abc.def.ghi",
        ];
        for text in cases {
            let redacted = redact_text(text);
            assert!(!redacted.contains("abc.def.ghi"), "{text} -> {redacted}");
            assert!(redacted.contains(REDACTED), "{text} -> {redacted}");
        }
        assert_eq!(redact_text("user=bob&page=2"), "user=bob&page=2");
        assert_eq!(redact_text("the token expired"), "the token expired");
    }

    #[test]
    fn redacts_credentials_inside_free_text() {
        let text = "request to http://u:p@h/x?token=abc failed; sent Bearer eyJhbGci and gave up";
        let redacted = redact_text(text);
        assert!(!redacted.contains("abc"), "{redacted}");
        assert!(!redacted.contains("eyJhbGci"), "{redacted}");
        assert!(!redacted.contains("u:p"), "{redacted}");
        assert!(redacted.contains("gave up"));
    }
}
