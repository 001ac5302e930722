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
struct UrlOrigin<'a> {
    scheme: Option<&'a str>,
    host: Option<&'a str>,
    port: Option<&'a str>,
}

/// The scheme, host and port of a URL, without the user information; nothing of a URL whose
/// scheme, host or port is not well formed, so that no other part of it can pass for one.
///
/// The URL is cut as the contract's redaction cuts it ([`candor_schema::redact::UrlParts`]): a
/// password whose `/` or `#` its client failed to encode is taken for user information, never
/// for a host or a path.
fn split_url(url: &str) -> UrlOrigin<'_> {
    let parts = candor_schema::redact::UrlParts::of(url);
    let Some(scheme) = parts.scheme.strip_suffix("://") else {
        return UrlOrigin::default();
    };
    let valid_scheme = scheme
        .as_bytes()
        .first()
        .is_some_and(u8::is_ascii_alphabetic)
        && scheme
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'));
    if !valid_scheme {
        return UrlOrigin::default();
    }
    let authority = parts.host;
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        match v6.split_once(']') {
            Some((host, rest)) => (host, rest.strip_prefix(':')),
            None => return UrlOrigin::default(),
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
        return UrlOrigin {
            scheme: Some(scheme),
            ..UrlOrigin::default()
        };
    }
    UrlOrigin {
        scheme: Some(scheme),
        host: Some(host),
        port,
    }
}
