//! An HTTP call's tool and target: its method, and its scheme, host, port and URL template,
//! never its path, query or user information.

use super::read::Facts;

/// The HTTP methods kept as they are; any other is `_OTHER`, as the HTTP conventions say, so
/// that a client sending arbitrary methods cannot make new tools.
const HTTP_METHODS: [&str; 9] = [
    "GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH",
];

pub(super) fn http_method(method: Option<&str>) -> &'static str {
    method
        .and_then(|method| {
            HTTP_METHODS
                .iter()
                .find(|known| known.eq_ignore_ascii_case(method))
        })
        .copied()
        .unwrap_or("_OTHER")
}

/// An HTTP call's target: scheme, host and port, and the URL template when the span has one.
/// Never the path itself, the query string or the user information: they are high-cardinality
/// and may hold secrets.
pub(super) fn http_target(facts: &Facts<'_>) -> String {
    let parsed = facts.url.map(split_url).unwrap_or_default();
    let scheme = facts.url_scheme.or(parsed.scheme).unwrap_or("http");
    let host = facts.server_address.or(parsed.host).unwrap_or("unknown");
    let template = facts
        .url_template
        .filter(|t| t.starts_with('/'))
        .map(|t| t.split(['?', '#']).next().unwrap_or_default())
        .unwrap_or_default();
    // Written in place, lower-cased as it goes: one allocation per target.
    let mut target = String::with_capacity(scheme.len() + host.len() + template.len() + 10);
    push_lowercase(&mut target, scheme);
    target.push_str("://");
    push_lowercase(&mut target, host);
    target.push(':');
    match (facts.server_port, parsed.port) {
        (Some(port), _) => {
            use std::fmt::Write as _;
            // Writing to a String cannot fail.
            let _ = write!(target, "{port}");
        }
        (None, Some(port)) => target.push_str(port),
        (None, None) if scheme.eq_ignore_ascii_case("https") => target.push_str("443"),
        (None, None) => target.push_str("80"),
    }
    target.push_str(template);
    target
}

/// Appends `text` to `out` with its ASCII letters in lower case.
fn push_lowercase(out: &mut String, text: &str) {
    if text.bytes().any(|b| b.is_ascii_uppercase()) {
        out.extend(text.chars().map(|c| c.to_ascii_lowercase()));
    } else {
        out.push_str(text);
    }
}

#[derive(Default)]
struct UrlParts<'a> {
    scheme: Option<&'a str>,
    host: Option<&'a str>,
    port: Option<&'a str>,
}

/// The scheme, host and port of a URL, without the user information; nothing of a URL whose
/// scheme, host or port is not well formed, so that no other part of it can pass for one.
///
/// The user information ends where the contract's redaction says it does
/// ([`candor_schema::redact::user_info_end`], over the text before the query): a password whose
/// `/` or `#` its client failed to encode is taken for user information, never for a host or a
/// path.
fn split_url(url: &str) -> UrlParts<'_> {
    let Some((scheme, rest)) = url.split_once("://") else {
        return UrlParts::default();
    };
    let valid_scheme = scheme
        .as_bytes()
        .first()
        .is_some_and(u8::is_ascii_alphabetic)
        && scheme
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'));
    if !valid_scheme {
        return UrlParts::default();
    }
    // Cut at the query only: a `#` its client failed to encode in a password stays with the
    // user information it belongs to.
    let base = rest.split('?').next().unwrap_or_default();
    let rest = match candor_schema::redact::user_info_end(base) {
        Some(at) => &rest[at + 1..],
        None => rest,
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        match v6.split_once(']') {
            Some((host, rest)) => (host, rest.strip_prefix(':')),
            None => return UrlParts::default(),
        }
    } else {
        match authority.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        }
    };
    let host_ok = !host.is_empty()
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_' | b':'));
    let port_ok =
        port.is_none_or(|p| (1..=5).contains(&p.len()) && p.bytes().all(|b| b.is_ascii_digit()));
    if !host_ok || !port_ok || (host.contains(':') && !authority.starts_with('[')) {
        return UrlParts {
            scheme: Some(scheme),
            ..UrlParts::default()
        };
    }
    UrlParts {
        scheme: Some(scheme),
        host: Some(host),
        port,
    }
}
