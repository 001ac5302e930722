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

/// Where the user-info of a URL ends: the byte index, in `after_scheme` (the text after the
/// first `://`, without the query and the fragment), of the `@` that ends it; `None` when there
/// is none (contract rule REDACT-TARGET, step 2).
///
/// The authority is the text up to the first `/`. When it holds an `@`, the user-info ends at
/// its last `@`. When it does not, but it holds a `:` and the rest holds an `@`, a password
/// whose `/` its client failed to encode (`user:pa/ss@host`) is taken to run to the last `@`:
/// a host with a port and an `@` in its path (`host:8080/@me`) then loses its host to the
/// redaction, which never shows a password. Every reader of URL authorities in Candor uses this
/// one rule.
///
/// ```
/// use candor_schema::redact::user_info_end;
/// assert_eq!(user_info_end("bob:hunter2@api.example/v1/@me"), Some(11));
/// assert_eq!(user_info_end("bob:pa/ss@api.example/v1"), Some(9));
/// assert_eq!(user_info_end("mastodon.example/@me"), None);
/// assert_eq!(user_info_end("api.example:8443/v1"), None);
/// ```
pub fn user_info_end(after_scheme: &str) -> Option<usize> {
    let authority = &after_scheme[..after_scheme.find('/').unwrap_or(after_scheme.len())];
    match authority.rfind('@') {
        Some(at) => Some(at),
        None if authority.contains(':') => after_scheme.rfind('@'),
        None => None,
    }
}

/// Removes user-info and secret query or fragment parameters from a URL.
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
    let (before_fragment, fragment) = split_once_keep(raw, '#');
    let (before_query, query) = split_once_keep(before_fragment, '?');
    let (scheme, rest) = match before_query.find("://") {
        Some(at) => before_query.split_at(at + 3),
        None => ("", before_query),
    };
    let user_info = if scheme.is_empty() {
        None
    } else {
        user_info_end(rest)
    };
    let (authority, path, host) = match user_info {
        // User-info that is already `REDACTED` stays as it is: redacting twice replaces nothing.
        Some(at) if &rest[..at] != REDACTED => {
            let after = &rest[at + 1..];
            let host_end = after.find('/').unwrap_or(after.len());
            ("", &after[host_end..], Some(&after[..host_end]))
        }
        _ => {
            let authority_end = rest.find('/').unwrap_or(rest.len());
            let (authority, path) = rest.split_at(authority_end);
            (authority, path, None)
        }
    };
    let query_redacted = query.map(redact_params);
    let fragment_redacted = fragment.map(redact_params);
    let changed = host.is_some()
        || matches!(&query_redacted, Some(Cow::Owned(_)))
        || matches!(&fragment_redacted, Some(Cow::Owned(_)));
    if !changed {
        return Cow::Borrowed(raw);
    }
    let mut out = String::with_capacity(raw.len());
    out.push_str(scheme);
    match host {
        Some(host) => {
            out.push_str(REDACTED);
            out.push('@');
            out.push_str(host);
        }
        None => out.push_str(authority),
    }
    out.push_str(path);
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
