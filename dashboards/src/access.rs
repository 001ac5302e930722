//! Who may read what the dashboards serve, in the style of Prometheus' web configuration.
//!
//! The forensic view shows error messages, targets and request ids: with any credential
//! configured (`[[web.users]]` or `[[web.tokens]]`), every request but the probes must carry
//! one. A user presents HTTP basic authentication checked against a bcrypt hash (make one with
//! `candor-dashboards hash-password`); a token is presented as `Authorization: Bearer`. Each
//! credential has a [`Role`]: `read` reads everything, `operate` also acknowledges alerts (every
//! request that is not a `GET` or `HEAD` is a write), `metrics` reads `/metrics` alone (for a
//! Prometheus scraper). The name a request was let in as reaches the handlers ([`Admitted`], a
//! request extension): an acknowledgement records it. `/healthz` and `/readyz` stay open: they answer `ok` or why the
//! dashboards are not ready, for the probes of an orchestrator that holds no credential.
//!
//! A request without credentials, or with credentials that match none, is refused with 401; a
//! credential whose role does not reach the path, with 403. Each refusal is counted by reason
//! ([`Access::refusals`], `candor_dashboards_http_refused_total`) and logged with the name the
//! request claimed, never with what it presented.
//!
//! Secrets are never in the configuration: it names the file or the environment variable that
//! holds each hash or token ([`Secret`]), read at start by [`WebSettings::access`]. Nothing this
//! module prints or formats (its `Debug` included) shows a hash, a password or a token.
//!
//! bcrypt is slow by design; a password that verified once is remembered by a SHA-256 digest of
//! the name and the password (never the password), so that a browser's every request does not
//! pay for it again. A wrong password is never remembered.

use std::collections::{BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse as _, Response};
use base64::Engine as _;
use candor_service::config::{ConfigError, invalid, not_blank};
use http::{HeaderValue, StatusCode, header};
use serde::Deserialize;
use sha2::{Digest as _, Sha256};

use crate::sync::lock;

/// What a credential may read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// The pages, the JSON API and `/metrics`.
    Read,
    /// What `read` reaches, and the writes: acknowledging an alert.
    Operate,
    /// `/metrics` alone: a Prometheus scraper's.
    Metrics,
}

impl Role {
    /// The role's name as the configuration spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Read => "read",
            Self::Operate => "operate",
            Self::Metrics => "metrics",
        }
    }

    fn reaches(self, area: Area) -> bool {
        match (self, area) {
            (_, Area::Probe) | (Self::Operate, _) => true,
            (Self::Read, area) => area != Area::Write,
            (Self::Metrics, area) => area == Area::Metrics,
        }
    }
}

/// The parts of what the dashboards serve, by who may read them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Area {
    /// `/healthz` and `/readyz`: open to anyone.
    Probe,
    /// `/metrics`.
    Metrics,
    /// The pages and the JSON API read: everything else that is a `GET` or `HEAD`.
    Pages,
    /// Any other method: a change (acknowledging an alert).
    Write,
}

impl Area {
    /// The area of a request.
    pub fn of(method: &http::Method, path: &str) -> Self {
        if method != http::Method::GET && method != http::Method::HEAD {
            return Self::Write;
        }
        match path {
            "/healthz" | "/readyz" => Self::Probe,
            "/metrics" => Self::Metrics,
            _ => Self::Pages,
        }
    }
}

/// The `[web]` section as written.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RawWeb {
    /// `web.tls_cert_path`.
    pub tls_cert_path: Option<String>,
    /// `web.tls_key_path`.
    pub tls_key_path: Option<String>,
    /// `[[web.users]]`.
    pub users: Vec<RawUser>,
    /// `[[web.tokens]]`.
    pub tokens: Vec<RawToken>,
}

/// A `[[web.users]]` entry: a name, a role, and where its bcrypt hash is.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawUser {
    /// The user name the browser sends.
    pub name: String,
    /// What the user may read.
    pub role: Role,
    /// A file holding the bcrypt hash of the password.
    pub password_hash_file: Option<String>,
    /// An environment variable holding the bcrypt hash of the password.
    pub password_hash_env: Option<String>,
}

/// A `[[web.tokens]]` entry: a name (for the logs), a role, and where its token is.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawToken {
    /// Who holds the token, as the logs name it.
    pub name: String,
    /// What the token may read.
    pub role: Role,
    /// A file holding the token.
    pub token_file: Option<String>,
    /// An environment variable holding the token.
    pub token_env: Option<String>,
}

/// Where a secret is: the configuration holds this, never the secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Secret {
    /// A file (its content, without the trailing line break).
    File(PathBuf),
    /// An environment variable.
    Env(String),
}

impl Secret {
    fn of(key: &str, file: Option<String>, env: Option<String>) -> Result<Self, ConfigError> {
        match (file, env) {
            (Some(file), None) => {
                not_blank(&format!("{key}_file"), &file)?;
                Ok(Self::File(PathBuf::from(file)))
            }
            (None, Some(env)) => {
                candor_kafka::env_var_name(&format!("{key}_env"), &env)
                    .map_err(|err| invalid(format!("{key}_env"), &env, err.to_string()))?;
                Ok(Self::Env(env))
            }
            (file, env) => Err(invalid(
                format!("{key}_file, {key}_env"),
                format!("{file:?}, {env:?}"),
                "give exactly one of the two",
            )),
        }
    }

    /// Reads the secret: a file's content or a variable's value, without surrounding white
    /// space.
    fn read(&self, env: &dyn Fn(&str) -> Option<String>) -> Result<String, AccessError> {
        let value = match self {
            Self::File(path) => {
                std::fs::read_to_string(path).map_err(|source| AccessError::Unreadable {
                    path: path.clone(),
                    source,
                })?
            }
            Self::Env(name) => env(name).ok_or_else(|| AccessError::Unset(name.clone()))?,
        };
        Ok(value.trim().to_owned())
    }
}

/// A validated user: the hash is read at start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserSpec {
    /// The user name.
    pub name: String,
    /// What the user may read.
    pub role: Role,
    /// Where the bcrypt hash is.
    pub password_hash: Secret,
}

/// A validated token: the token is read at start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenSpec {
    /// Who holds it.
    pub name: String,
    /// What it may read.
    pub role: Role,
    /// Where the token is.
    pub token: Secret,
}

/// The listener's TLS: PEM files, read at start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// The certificate chain.
    pub cert: PathBuf,
    /// The private key.
    pub key: PathBuf,
}

/// The `[web]` section, validated. It names files and variables; [`WebSettings::access`] reads
/// them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WebSettings {
    /// TLS for the listener; plain HTTP without it.
    pub tls: Option<TlsFiles>,
    /// The users of basic authentication.
    pub users: Vec<UserSpec>,
    /// The bearer tokens.
    pub tokens: Vec<TokenSpec>,
}

const TLS_PAIR: &str = "web.tls_cert_path and web.tls_key_path go together, neither blank";

impl RawWeb {
    /// Validates the section; reads nothing.
    pub fn validate(self) -> Result<WebSettings, ConfigError> {
        let tls = match (self.tls_cert_path, self.tls_key_path) {
            (None, None) => None,
            (Some(cert), Some(key)) if !cert.trim().is_empty() && !key.trim().is_empty() => {
                Some(TlsFiles {
                    cert: cert.into(),
                    key: key.into(),
                })
            }
            (cert, key) => {
                return Err(invalid(
                    "web.tls_cert_path",
                    format!("{cert:?}, web.tls_key_path {key:?}"),
                    TLS_PAIR,
                ));
            }
        };
        let mut names = BTreeSet::new();
        let mut users = Vec::with_capacity(self.users.len());
        for user in self.users {
            not_blank("web.users.name", &user.name)?;
            if user.name.contains(':') {
                return Err(invalid(
                    "web.users.name",
                    &user.name,
                    "basic authentication cannot carry a ':' in a user name",
                ));
            }
            if !names.insert(user.name.clone()) {
                return Err(invalid("web.users.name", &user.name, "named twice"));
            }
            let password_hash = Secret::of(
                "web.users.password_hash",
                user.password_hash_file,
                user.password_hash_env,
            )?;
            users.push(UserSpec {
                name: user.name,
                role: user.role,
                password_hash,
            });
        }
        let mut tokens = Vec::with_capacity(self.tokens.len());
        for token in self.tokens {
            not_blank("web.tokens.name", &token.name)?;
            if !names.insert(token.name.clone()) {
                return Err(invalid(
                    "web.tokens.name",
                    &token.name,
                    "named twice (users and tokens share their names)",
                ));
            }
            let secret = Secret::of("web.tokens.token", token.token_file, token.token_env)?;
            tokens.push(TokenSpec {
                name: token.name,
                role: token.role,
                token: secret,
            });
        }
        Ok(WebSettings { tls, users, tokens })
    }
}

/// A credential could not be read at start. No message holds a secret.
#[derive(Debug, thiserror::Error)]
pub enum AccessError {
    /// A secret's file could not be read.
    #[error("cannot read {path}")]
    Unreadable {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A secret's environment variable is not set.
    #[error("the environment variable {0} is not set")]
    Unset(String),
    /// A user's hash is not a bcrypt hash.
    #[error(
        "the password hash of user {0:?} is not a bcrypt hash ($2b$…); make one with \
         `candor-dashboards hash-password`"
    )]
    NotBcrypt(String),
    /// A token is empty.
    #[error("the token of {0:?} is empty")]
    EmptyToken(String),
}

impl WebSettings {
    /// Reads every hash and token (`env` reads a variable) into the checks requests pass.
    pub fn access(&self, env: &dyn Fn(&str) -> Option<String>) -> Result<Access, AccessError> {
        let mut users = HashMap::with_capacity(self.users.len());
        for user in &self.users {
            let hash = user.password_hash.read(env)?;
            if hash.parse::<bcrypt::HashParts>().is_err() {
                return Err(AccessError::NotBcrypt(user.name.clone()));
            }
            users.insert(
                user.name.clone(),
                User {
                    hash,
                    role: user.role,
                },
            );
        }
        let mut tokens = Vec::with_capacity(self.tokens.len());
        for token in &self.tokens {
            let value = token.token.read(env)?;
            if value.is_empty() {
                return Err(AccessError::EmptyToken(token.name.clone()));
            }
            tokens.push(Token {
                name: token.name.clone(),
                digest: Sha256::digest(value.as_bytes()).into(),
                role: token.role,
            });
        }
        Ok(Access {
            users,
            tokens,
            verified: Mutex::new(HashMap::new()),
            refused: RefusalCounts::default(),
        })
    }
}

struct User {
    hash: String,
    role: Role,
}

struct Token {
    name: String,
    digest: [u8; 32],
    role: Role,
}

/// Why a request was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// It carried no credential (401).
    NoCredentials,
    /// Its credential matched none, or was not basic or bearer authentication (401).
    WrongCredentials,
    /// Its credential's role does not reach the path (403).
    Forbidden,
}

impl Refusal {
    /// Every reason, in the order [`Access::refusals`] counts them.
    pub const ALL: [Self; 3] = [Self::NoCredentials, Self::WrongCredentials, Self::Forbidden];

    /// The reason's label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::NoCredentials => "no_credentials",
            Self::WrongCredentials => "wrong_credentials",
            Self::Forbidden => "forbidden",
        }
    }
}

#[derive(Debug, Default)]
struct RefusalCounts([AtomicU64; 3]);

/// Who a request was let in as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Admitted {
    /// No credential is configured: everyone is.
    Anyone,
    /// The path is a probe, open to anyone.
    Probe,
    /// A user or a token, by name.
    As(String),
    /// A request for `/alerts/ack` that carries an acknowledgement link's signature: let
    /// through without a credential, for the handler to verify ([`crate::ack_link`]).
    Link,
}

impl Admitted {
    /// The name an acknowledgement records: the credential's, or `anonymous`.
    pub fn name(&self) -> &str {
        match self {
            Self::As(name) => name,
            Self::Link => crate::ack_link::LINK_USER,
            Self::Anyone | Self::Probe => "anonymous",
        }
    }
}

/// How much of a refused request's body is read before the answer.
const REFUSED_BODY_READ: usize = 64 << 10;

/// Remembered verifications at most; past it the memory starts again.
const VERIFIED_AT_MOST: usize = 1024;

/// The checks every request passes: the credentials read at start, the verifications
/// remembered and the refusals counted.
pub struct Access {
    users: HashMap<String, User>,
    tokens: Vec<Token>,
    /// SHA-256 of `name`, a zero byte and the password, of every basic authentication that
    /// verified.
    verified: Mutex<HashMap<[u8; 32], ()>>,
    refused: RefusalCounts,
}

impl std::fmt::Debug for Access {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Names and roles only: never a hash or a token.
        let users: Vec<(&str, &str)> = self
            .users
            .iter()
            .map(|(name, user)| (name.as_str(), user.role.as_str()))
            .collect();
        let tokens: Vec<(&str, &str)> = self
            .tokens
            .iter()
            .map(|token| (token.name.as_str(), token.role.as_str()))
            .collect();
        f.debug_struct("Access")
            .field("users", &users)
            .field("tokens", &tokens)
            .finish_non_exhaustive()
    }
}

impl Access {
    /// No credential: every request is let in.
    pub fn open() -> Self {
        Self {
            users: HashMap::new(),
            tokens: Vec::new(),
            verified: Mutex::new(HashMap::new()),
            refused: RefusalCounts::default(),
        }
    }

    /// Whether every request is let in.
    pub fn is_open(&self) -> bool {
        self.users.is_empty() && self.tokens.is_empty()
    }

    /// Checks a `method` request for `path` with its `Authorization` header, and counts a
    /// refusal. May verify a bcrypt hash: call it where blocking for a fraction of a second is
    /// fine.
    pub fn check(
        &self,
        method: &http::Method,
        path: &str,
        authorization: Option<&[u8]>,
    ) -> Result<Admitted, Refusal> {
        let area = Area::of(method, path);
        let admitted = if self.is_open() {
            Ok(Admitted::Anyone)
        } else if area == Area::Probe {
            Ok(Admitted::Probe)
        } else {
            self.identify(authorization).and_then(|(name, role)| {
                if role.reaches(area) {
                    Ok(Admitted::As(name))
                } else {
                    Err(Refusal::Forbidden)
                }
            })
        };
        if let Err(refusal) = admitted {
            self.refused.0[refusal as usize].fetch_add(1, Ordering::Relaxed);
        }
        admitted
    }

    /// Refusals since start, per reason ([`Refusal::ALL`]'s order).
    pub fn refusals(&self) -> [(Refusal, u64); 3] {
        Refusal::ALL.map(|refusal| {
            (
                refusal,
                self.refused.0[refusal as usize].load(Ordering::Relaxed),
            )
        })
    }

    /// The credential's name and role.
    fn identify(&self, authorization: Option<&[u8]>) -> Result<(String, Role), Refusal> {
        let value = authorization.ok_or(Refusal::NoCredentials)?;
        if let Some(presented) = strip_scheme(value, b"bearer") {
            let digest: [u8; 32] = Sha256::digest(presented).into();
            // Every token is compared, in time that does not depend on where they differ.
            let mut found = None;
            for token in &self.tokens {
                if constant_time_eq(&digest, &token.digest) {
                    found = Some((token.name.clone(), token.role));
                }
            }
            return found.ok_or(Refusal::WrongCredentials);
        }
        let encoded = strip_scheme(value, b"basic").ok_or(Refusal::WrongCredentials)?;
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(encoded.trim_ascii())
            .map_err(|_| Refusal::WrongCredentials)?;
        let decoded = String::from_utf8(decoded).map_err(|_| Refusal::WrongCredentials)?;
        let (name, password) = decoded.split_once(':').ok_or(Refusal::WrongCredentials)?;
        let user = self.users.get(name).ok_or(Refusal::WrongCredentials)?;
        let remembered: [u8; 32] = Sha256::new()
            .chain_update(name.as_bytes())
            .chain_update([0])
            .chain_update(password.as_bytes())
            .finalize()
            .into();
        if lock(&self.verified).contains_key(&remembered) {
            return Ok((name.to_owned(), user.role));
        }
        if !bcrypt::verify(password, &user.hash).unwrap_or(false) {
            return Err(Refusal::WrongCredentials);
        }
        let mut verified = lock(&self.verified);
        if verified.len() >= VERIFIED_AT_MOST {
            verified.clear();
        }
        verified.insert(remembered, ());
        Ok((name.to_owned(), user.role))
    }

    /// The `WWW-Authenticate` challenge of a 401: basic when users are configured, so that a
    /// browser asks for them.
    fn challenge(&self) -> &'static str {
        if self.users.is_empty() {
            "Bearer realm=\"candor-dashboards\""
        } else {
            "Basic realm=\"candor-dashboards\", charset=\"UTF-8\""
        }
    }
}

/// The credential after `scheme` (compared without case) and a space.
fn strip_scheme<'a>(value: &'a [u8], scheme: &[u8]) -> Option<&'a [u8]> {
    let (head, rest) = value.split_at_checked(scheme.len())?;
    if !head.eq_ignore_ascii_case(scheme) {
        return None;
    }
    rest.strip_prefix(b" ")
}

/// Compares in time that depends only on the length.
fn constant_time_eq(a: &[u8; 32], b: &[u8; 32]) -> bool {
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The middleware that lets a request through or answers 401 or 403. A bcrypt verification
/// runs on the blocking pool.
pub async fn guard(
    State(access): State<Arc<Access>>,
    mut request: Request,
    next: Next,
) -> Response {
    if access.is_open() {
        request.extensions_mut().insert(Admitted::Anyone);
        return next.run(request).await;
    }
    let path = request.uri().path().to_owned();
    // The link is its own credential; its signature is verified where it is used.
    if path == "/alerts/ack" && crate::ack_link::is_signed(request.uri().query()) {
        request.extensions_mut().insert(Admitted::Link);
        return next.run(request).await;
    }
    let method = request.method().clone();
    let authorization = request
        .headers()
        .get(header::AUTHORIZATION)
        .map(|value| value.as_bytes().to_vec());
    let checked = {
        let access = Arc::clone(&access);
        let path = path.clone();
        tokio::task::spawn_blocking(move || access.check(&method, &path, authorization.as_deref()))
            .await
    };
    match checked {
        Ok(Ok(admitted)) => {
            request.extensions_mut().insert(admitted);
            next.run(request).await
        }
        Ok(Err(refusal)) => {
            tracing::info!(path = %path, reason = refusal.as_str(), "request refused");
            // A small body is read before the answer, so that the connection does not close on
            // unread bytes (a reset that can lose the answer on the client's side); a larger one
            // is left, and the connection with it.
            let _ = axum::body::to_bytes(request.into_body(), REFUSED_BODY_READ).await;
            refuse(&access, refusal)
        }
        Err(err) => {
            tracing::error!(error = %err, "the credential check panicked");
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                "500 the credential check failed\n",
            )
                .into_response()
        }
    }
}

fn refuse(access: &Access, refusal: Refusal) -> Response {
    match refusal {
        Refusal::Forbidden => (
            StatusCode::FORBIDDEN,
            "403 forbidden: this credential's role does not reach this path\n",
        )
            .into_response(),
        Refusal::NoCredentials | Refusal::WrongCredentials => {
            let mut response = (
                StatusCode::UNAUTHORIZED,
                "401 unauthorized: the dashboards need a user or a token\n",
            )
                .into_response();
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static(access.challenge()),
            );
            response
        }
    }
}

/// A bcrypt hash of `password` at `cost` (4 to 31), for `[[web.users]]`.
pub fn hash_password(password: &str, cost: u32) -> Result<String, bcrypt::BcryptError> {
    bcrypt::hash(password, cost)
}

#[cfg(test)]
mod tests {
    use super::*;

    const GET: http::Method = http::Method::GET;

    fn settings(toml_text: &str) -> Result<WebSettings, ConfigError> {
        let raw: RawWeb = candor_service::config::parse_toml(toml_text)?;
        raw.validate()
    }

    fn basic(name: &str, password: &str) -> Vec<u8> {
        let encoded =
            base64::engine::general_purpose::STANDARD.encode(format!("{name}:{password}"));
        format!("Basic {encoded}").into_bytes()
    }

    /// An `Access` with user `sre` (password `correct horse`, role read) and the tokens
    /// `scrape-token` (metrics) and `read-token` (read), from variables.
    fn access() -> Access {
        let hash = hash_password("correct horse", 4).unwrap();
        let settings = settings(
            r#"
            [[users]]
            name = "sre"
            role = "read"
            password_hash_env = "SRE_HASH"
            [[tokens]]
            name = "prometheus"
            role = "metrics"
            token_env = "SCRAPE"
            [[tokens]]
            name = "robot"
            role = "read"
            token_env = "READ"
            [[tokens]]
            name = "oncall"
            role = "operate"
            token_env = "OPERATE"
            "#,
        )
        .unwrap();
        let env = move |name: &str| match name {
            "SRE_HASH" => Some(format!("{hash}\n")),
            "SCRAPE" => Some("scrape-token".to_owned()),
            "READ" => Some("read-token".to_owned()),
            "OPERATE" => Some("operate-token".to_owned()),
            _ => None,
        };
        settings.access(&env).unwrap()
    }

    #[test]
    fn each_credential_reaches_what_its_role_allows_and_nothing_else() {
        let access = access();
        let sre = basic("sre", "correct horse");
        let as_sre = Ok(Admitted::As("sre".into()));
        assert_eq!(access.check(&GET, "/", Some(&sre)), as_sre);
        assert_eq!(access.check(&GET, "/api/events", Some(&sre)), as_sre);
        assert_eq!(access.check(&GET, "/metrics", Some(&sre)), as_sre);
        let scraper = b"Bearer scrape-token".as_slice();
        let as_prometheus = Ok(Admitted::As("prometheus".into()));
        assert_eq!(access.check(&GET, "/metrics", Some(scraper)), as_prometheus);
        assert_eq!(
            access.check(&GET, "/", Some(scraper)),
            Err(Refusal::Forbidden)
        );
        assert_eq!(
            access.check(&GET, "/api/overview", Some(scraper)),
            Err(Refusal::Forbidden)
        );
        assert_eq!(
            access.check(&GET, "/api/events", Some(b"bearer read-token")),
            Ok(Admitted::As("robot".into()))
        );
        let post = http::Method::POST;
        assert_eq!(
            access.check(&post, "/api/alerts/ack", Some(b"Bearer operate-token")),
            Ok(Admitted::As("oncall".into()))
        );
        assert_eq!(
            access.check(&GET, "/", Some(b"Bearer operate-token")),
            Ok(Admitted::As("oncall".into()))
        );
        for reader in [&sre[..], b"Bearer read-token", scraper] {
            assert_eq!(
                access.check(&post, "/api/alerts/ack", Some(reader)),
                Err(Refusal::Forbidden)
            );
        }
        assert_eq!(access.check(&GET, "/healthz", None), Ok(Admitted::Probe));
        assert_eq!(access.check(&GET, "/readyz", None), Ok(Admitted::Probe));
    }

    #[test]
    fn missing_and_wrong_credentials_are_refused_and_counted() {
        let access = access();
        for (presented, refusal) in [
            (None, Refusal::NoCredentials),
            (Some(basic("sre", "wrong")), Refusal::WrongCredentials),
            (
                Some(basic("sre", "correct horse ")),
                Refusal::WrongCredentials,
            ),
            (
                Some(basic("nobody", "correct horse")),
                Refusal::WrongCredentials,
            ),
            (
                Some(b"Bearer scrape-toke".to_vec()),
                Refusal::WrongCredentials,
            ),
            (
                Some(b"Bearer scrape-token2".to_vec()),
                Refusal::WrongCredentials,
            ),
            (
                Some(b"Token scrape-token".to_vec()),
                Refusal::WrongCredentials,
            ),
            (
                Some(b"Basic !!not base64".to_vec()),
                Refusal::WrongCredentials,
            ),
            (Some(b"Basic".to_vec()), Refusal::WrongCredentials),
        ] {
            assert_eq!(
                access.check(&GET, "/api/events", presented.as_deref()),
                Err(refusal),
                "{:?}",
                presented.map(|p| String::from_utf8_lossy(&p).into_owned())
            );
        }
        let counted: Vec<u64> = access.refusals().iter().map(|(_, n)| *n).collect();
        assert_eq!(counted, [1, 8, 0]);
    }

    #[test]
    fn a_verified_password_is_remembered_and_a_wrong_one_never_is() {
        let access = access();
        assert!(
            access
                .check(&GET, "/", Some(&basic("sre", "correct horse")))
                .is_ok()
        );
        assert_eq!(lock(&access.verified).len(), 1);
        assert!(
            access
                .check(&GET, "/", Some(&basic("sre", "correct horse")))
                .is_ok()
        );
        assert!(
            access
                .check(&GET, "/", Some(&basic("sre", "wrong")))
                .is_err()
        );
        assert_eq!(lock(&access.verified).len(), 1);
    }

    #[test]
    fn without_credentials_configured_everyone_is_let_in() {
        let access = WebSettings::default().access(&|_| None).unwrap();
        assert!(access.is_open());
        assert_eq!(
            access.check(&GET, "/api/events", None),
            Ok(Admitted::Anyone)
        );
        assert_eq!(access.refusals().iter().map(|(_, n)| n).sum::<u64>(), 0);
    }

    #[test]
    fn the_section_is_refused_with_the_key_at_fault() {
        for (text, key) in [
            ("tls_cert_path = \"c.pem\"", "web.tls_cert_path"),
            (
                "[[users]]\nname = \"a\"\nrole = \"read\"",
                "web.users.password_hash_file, web.users.password_hash_env",
            ),
            (
                "[[users]]\nname = \"a\"\nrole = \"read\"\npassword_hash_file = \"f\"\npassword_hash_env = \"E\"",
                "web.users.password_hash_file, web.users.password_hash_env",
            ),
            (
                "[[users]]\nname = \"a:b\"\nrole = \"read\"\npassword_hash_env = \"E\"",
                "web.users.name",
            ),
            (
                "[[users]]\nname = \"a\"\nrole = \"read\"\npassword_hash_env = \"E\"\n[[tokens]]\nname = \"a\"\nrole = \"metrics\"\ntoken_env = \"T\"",
                "web.tokens.name",
            ),
            (
                "[[tokens]]\nname = \"p\"\nrole = \"metrics\"\ntoken_env = \"not a name\"",
                "web.tokens.token_env",
            ),
        ] {
            let err = settings(text).unwrap_err();
            assert!(err.to_string().contains(key), "{text}: {err}");
        }
        let err =
            settings("[[tokens]]\nname = \"p\"\nrole = \"admin\"\ntoken_env = \"T\"").unwrap_err();
        assert!(err.to_string().contains("admin"), "{err}");
    }

    #[test]
    fn no_error_or_debug_output_shows_a_secret() {
        let access = access();
        let shown = format!("{access:?}");
        assert!(
            shown.contains("sre") && shown.contains("prometheus"),
            "{shown}"
        );
        for secret in ["scrape-token", "read-token", "$2b$"] {
            assert!(!shown.contains(secret), "{shown}");
        }
        let settings =
            settings("[[users]]\nname = \"sre\"\nrole = \"read\"\npassword_hash_env = \"H\"")
                .unwrap();
        let err = settings
            .access(&|_| Some("correct horse".to_owned()))
            .unwrap_err();
        assert!(matches!(err, AccessError::NotBcrypt(_)));
        assert!(!err.to_string().contains("correct horse"), "{err}");
    }
}
