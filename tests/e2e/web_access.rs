//! The dashboards locked: TLS on their listener with a certificate from a private CA, a user of
//! basic authentication whose bcrypt hash is in a file, a scraper's token in a file with the
//! `metrics` role and a read token in an environment variable. Every answer is read with curl
//! verifying the CA, and the page in headless Chromium trusting the CA as a user who added it
//! would. Requests without credentials, with a wrong password or a token's role on a path it
//! does not reach are refused with 401 and 403, counted on `/metrics`, and no secret appears in
//! the process's output or in `--check`.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use candor_e2e::dashboards::{Receiver, artifacts, browser_with};
use candor_e2e::pki::{Pki, make_pki};
use candor_e2e::process::Running;
use candor_e2e::{free_port, target_dir, tempdir, wait_for};
use serde_json::json;

const PASSWORD: &str = "correct horse battery staple";
const READ_TOKEN_VAR: &str = "CANDOR_E2E_DASHBOARDS_READ_TOKEN";
const OPERATE_TOKEN_VAR: &str = "CANDOR_E2E_DASHBOARDS_OPERATE_TOKEN";

/// What curl saw: the status (`None` when no HTTP answer came) and the headers and body.
struct Answer {
    status: Option<u16>,
    text: String,
}

/// A GET of `url` with curl, verifying the server against `ca` (`None`: the system's CAs
/// only), with `header` (an `Authorization` value) when given. The header goes through a file,
/// never on the command line.
fn curl(ca: Option<&Path>, url: &str, header: Option<&str>, dir: &Path) -> Answer {
    curl_with(ca, url, header, None, dir)
}

/// [`curl`], a POST of the JSON `body` when given.
fn curl_with(
    ca: Option<&Path>,
    url: &str,
    header: Option<&str>,
    body: Option<&str>,
    dir: &Path,
) -> Answer {
    let mut command = Command::new("curl");
    command.args(["-s", "-i", "--max-time", "10", "-w", "\n%{http_code}"]);
    if let Some(body) = body {
        let file = dir.join(format!("body-{}", free_port()));
        std::fs::write(&file, body).expect("the body file");
        command.args(["-X", "POST", "-H", "Content-Type: application/json"]);
        command
            .arg("--data-binary")
            .arg(format!("@{}", file.display()));
    }
    if let Some(ca) = ca {
        command.arg("--cacert").arg(ca);
    }
    if let Some(value) = header {
        let file = dir.join(format!("header-{}", free_port()));
        std::fs::write(&file, format!("Authorization: {value}\n")).expect("the header file");
        command.arg("-H").arg(format!("@{}", file.display()));
    }
    let output = command
        .arg(url)
        .stdin(Stdio::null())
        .output()
        .expect("running curl");
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    let (text, code) = text.rsplit_once('\n').unwrap_or(("", &text));
    Answer {
        status: code.trim().parse().ok().filter(|code| *code != 0),
        text: text.to_owned(),
    }
}

fn basic(name: &str, password: &str) -> String {
    // The base64 of `name:password`, as a browser sends it; written here so that the test does
    // not share the server's decoder.
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let bytes = format!("{name}:{password}").into_bytes();
    let mut encoded = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | (u32::from(*b) << (16 - 8 * i)));
        for i in 0..4 {
            if i <= chunk.len() {
                encoded.push(char::from(ALPHABET[(n >> (18 - 6 * i) & 63) as usize]));
            } else {
                encoded.push('=');
            }
        }
    }
    format!("Basic {encoded}")
}

/// `candor-dashboards hash-password --cost 4` of `password`.
fn hash(binary: &Path, password: &str) -> String {
    use std::io::Write as _;
    let mut child = Command::new(binary)
        .args(["hash-password", "--cost", "4"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("starting hash-password");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(format!("{password}\n").as_bytes())
        .expect("writing the password");
    let output = child.wait_with_output().expect("hash-password");
    assert!(output.status.success(), "hash-password failed");
    String::from_utf8(output.stdout)
        .expect("UTF-8")
        .trim()
        .to_owned()
}

struct Locked {
    process: Running,
    /// Where the dashboards send their notifications (plain HTTP).
    receiver: Receiver,
    url: String,
    pki: Pki,
    dir: PathBuf,
    secrets: Vec<String>,
    config: PathBuf,
    env: Vec<(String, String)>,
}

/// Starts the dashboards with TLS, a user and two tokens; waits for `/healthz` over HTTPS.
async fn start_locked() -> Locked {
    let dir = tempdir("web-access");
    std::fs::create_dir_all(&dir).expect("the test's directory");
    let pki = make_pki(&dir);
    let binary = target_dir().join("candor-dashboards");
    let password_hash = hash(&binary, PASSWORD);
    assert!(password_hash.starts_with("$2"), "{password_hash}");
    std::fs::write(dir.join("sre.hash"), format!("{password_hash}\n")).expect("the hash file");
    let scrape_token = format!("scrape-{}-{}", std::process::id(), free_port());
    std::fs::write(dir.join("scrape.token"), &scrape_token).expect("the token file");
    let read_token = format!("read-{}-{}", std::process::id(), free_port());
    let operate_token = format!("operate-{}-{}", std::process::id(), free_port());
    let rules = dir.join("rules.toml");
    std::fs::write(&rules, WATCHDOG).expect("the rules file");
    let port = free_port();
    let receiver = Receiver::start(None).await;
    let config = dir.join("dashboards.toml");
    std::fs::write(
        &config,
        format!(
            "listen = \"127.0.0.1:{port}\"\n\
             [web]\n\
             tls_cert_path = \"{cert}\"\n\
             tls_key_path = \"{key}\"\n\
             [[web.users]]\n\
             name = \"sre\"\n\
             role = \"read\"\n\
             password_hash_file = \"{dir}/sre.hash\"\n\
             [[web.tokens]]\n\
             name = \"prometheus\"\n\
             role = \"metrics\"\n\
             token_file = \"{dir}/scrape.token\"\n\
             [[web.tokens]]\n\
             name = \"robot\"\n\
             role = \"read\"\n\
             token_env = \"{READ_TOKEN_VAR}\"\n\
             [[web.tokens]]\n\
             name = \"oncall\"\n\
             role = \"operate\"\n\
             token_env = \"{OPERATE_TOKEN_VAR}\"\n",
            cert = pki.cert.display(),
            key = pki.key.display(),
            dir = dir.display(),
        ),
    )
    .expect("the configuration");
    let env = vec![
        (READ_TOKEN_VAR.to_owned(), read_token.clone()),
        (OPERATE_TOKEN_VAR.to_owned(), operate_token.clone()),
    ];
    let args = vec![
        "--config".to_owned(),
        config.display().to_string(),
        // No broker: what is checked is who may read, not what there is to read.
        "--kafka".into(),
        "127.0.0.1:1".into(),
        "--tables".into(),
        dir.join("tables").display().to_string(),
        "--state-dir".into(),
        dir.join("state").display().to_string(),
        // The watchdog fires without a broker once the rules run, which they do when Kafka has
        // not been reached for a second: an alert to acknowledge.
        "--rules".into(),
        rules.display().to_string(),
        "--evaluate-every".into(),
        "500ms".into(),
        "--kafka-stale-after".into(),
        "1s".into(),
        "--webhook".into(),
        receiver.url.clone(),
        "--external-url".into(),
        format!("https://localhost:{port}"),
    ];
    let env_refs: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let process = Running::spawn("dashboards-locked", &binary, &args, &env_refs);
    let url = format!("https://localhost:{port}");
    let healthz = format!("{url}/healthz");
    let (ca, probe_dir) = (pki.ca.clone(), dir.clone());
    wait_for(
        "the locked dashboards' /healthz over HTTPS",
        Duration::from_secs(60),
        || {
            let (ca, healthz, probe_dir) = (ca.clone(), healthz.clone(), probe_dir.clone());
            async move {
                let answer = tokio::task::spawn_blocking(move || {
                    curl(Some(&ca), &healthz, None, &probe_dir)
                })
                .await
                .ok()?;
                (answer.status == Some(200)).then_some(())
            }
        },
    )
    .await;
    Locked {
        process,
        receiver,
        url,
        pki,
        dir,
        secrets: vec![
            PASSWORD.to_owned(),
            password_hash,
            scrape_token,
            read_token,
            operate_token,
        ],
        config,
        env,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboards_let_in_only_the_credentials_configured_over_tls() {
    let locked = start_locked().await;
    let (ca, dir) = (Some(locked.pki.ca.as_path()), locked.dir.as_path());
    let [_, _, scrape, read, operate] = &locked.secrets[..] else {
        unreachable!("five secrets")
    };
    let sre = basic("sre", PASSWORD);
    let wrong = basic("sre", "correct horse battery stapler");
    let scraper = format!("Bearer {scrape}");
    let reader = format!("Bearer {read}");
    let get =
        |path: &str, header: Option<&str>| curl(ca, &format!("{}{path}", locked.url), header, dir);

    // (path, credential, status): 401 without or with a wrong credential, 403 for a role that
    // does not reach the path, 200 otherwise; the probes are open.
    let cases: [(&str, Option<&str>, u16); 14] = [
        ("/", None, 401),
        ("/api/overview", None, 401),
        ("/metrics", None, 401),
        ("/api/alerts", Some(&wrong), 401),
        ("/api/alerts", Some("Bearer not-a-token"), 401),
        ("/", Some(&scraper), 403),
        ("/api/health", Some(&scraper), 403),
        ("/metrics", Some(&scraper), 200),
        ("/", Some(&sre), 200),
        ("/api/overview", Some(&sre), 200),
        ("/metrics", Some(&sre), 200),
        ("/api/alerts", Some(&reader), 200),
        ("/healthz", None, 200),
        ("/readyz", None, 503),
    ];
    for (path, header, status) in cases {
        let answer = get(path, header);
        assert_eq!(
            answer.status,
            Some(status),
            "{path} with {:?}: {}",
            header.map(|h| h.split(' ').next()),
            answer.text
        );
        if status == 401 {
            assert!(
                answer
                    .text
                    .to_lowercase()
                    .contains("www-authenticate: basic realm="),
                "a 401 asks for basic authentication: {}",
                answer.text
            );
        }
    }
    // /metrics is read from the newest published snapshot, at most a second old.
    let expected: Vec<String> = [
        ("no_credentials", 3),
        ("wrong_credentials", 2),
        ("forbidden", 2),
    ]
    .iter()
    .map(|(reason, count)| {
        format!("candor_dashboards_http_refused_total{{reason=\"{reason}\"}} {count}")
    })
    .collect();
    wait_for(
        &format!("{expected:?} on /metrics"),
        Duration::from_secs(10),
        || async {
            let metrics = get("/metrics", Some(&scraper)).text;
            expected
                .iter()
                .all(|series| metrics.contains(series.as_str()))
                .then_some(())
        },
    )
    .await;

    // Acknowledging is a write: the operate role's alone, and the alert says who took it on.
    wait_for("the watchdog firing", Duration::from_secs(30), || async {
        let alerts = get("/api/alerts", Some(&sre)).text;
        alerts.contains("\"state\":\"firing\"").then_some(())
    })
    .await;
    // A notification's signed link acknowledges its episode without a credential: opening it
    // changes nothing, its button does, and a link whose signature was changed is refused.
    let link = wait_for(
        "a notification with its acknowledgement link",
        Duration::from_secs(30),
        || async {
            locked.receiver.alerts().iter().find_map(|alert| {
                alert["annotations"]["acknowledge_url"]
                    .as_str()
                    .map(str::to_owned)
            })
        },
    )
    .await;
    let opened = curl(ca, &link, None, dir);
    assert_eq!(opened.status, Some(200), "{}", opened.text);
    assert!(
        opened.text.contains("<form method=\"post\""),
        "{}",
        opened.text
    );
    assert!(
        get("/api/alerts", Some(&sre))
            .text
            .contains("\"acknowledged\":null"),
        "opening the link acknowledged"
    );
    let mut tampered = link.clone();
    let last = tampered.pop().expect("a signature");
    tampered.push(if last == '0' { '1' } else { '0' });
    assert_eq!(curl(ca, &tampered, None, dir).status, Some(403));
    assert_eq!(
        curl_with(ca, &tampered, None, Some(""), dir).status,
        Some(403)
    );
    let pressed = curl_with(ca, &link, None, Some(""), dir);
    assert_eq!(pressed.status, Some(303), "{}", pressed.text);
    let alerts = get("/api/alerts", Some(&sre)).text;
    assert!(
        alerts.contains("\"acknowledged\":{\"by\":\"notification link\""),
        "{alerts}"
    );

    let ack = r#"{"name": "CandorWatchdog", "labels": {}}"#;
    let post = |header: &str| {
        curl_with(
            ca,
            &format!("{}/api/alerts/ack", locked.url),
            Some(header),
            Some(ack),
            dir,
        )
    };
    for reader in [&sre, &reader, &scraper] {
        assert_eq!(
            post(reader).status,
            Some(403),
            "a read-only credential acknowledged"
        );
    }
    // The operate role may acknowledge; the first acknowledgement is the one kept.
    let oncall = format!("Bearer {operate}");
    let acked = post(&oncall);
    assert_eq!(acked.status, Some(200), "{}", acked.text);
    assert!(
        acked
            .text
            .contains("\"acknowledged\":{\"by\":\"notification link\""),
        "{}",
        acked.text
    );

    // The certificate is trusted through the private CA alone, and plain HTTP gets no page.
    let untrusted = curl(None, &format!("{}/healthz", locked.url), None, dir);
    assert_eq!(untrusted.status, None, "{}", untrusted.text);
    let plain = curl(
        ca,
        &locked.url.replace("https://", "http://"),
        Some(&sre),
        dir,
    );
    assert_ne!(plain.status, Some(200), "{}", plain.text);

    // In a real browser: the page over HTTPS, verified against the CA, with the user's
    // credentials.
    let authorization = dir.join("browser-authorization");
    std::fs::write(&authorization, &sre).expect("the browser's header file");
    let more: Vec<OsString> = vec![
        "--ca-cert".into(),
        locked.pki.ca.clone().into(),
        "--authorization-file".into(),
        authorization.into(),
    ];
    let url = format!("{}/?range=15m", locked.url);
    let screenshot = artifacts().join("dashboards-locked.png");
    let expect = json!({ "text_present": ["Silent-failure rate by target"] });
    let check =
        tokio::task::spawn_blocking(move || browser_with(&url, &expect, &screenshot, &more))
            .await
            .expect("the browser check panicked");
    assert!(check.ok, "{}", check.report);

    // No secret in what the process printed, nor in what --check prints.
    let check_output = {
        let env_refs: Vec<(&str, &str)> = locked
            .env
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        let output = Command::new(target_dir().join("candor-dashboards"))
            .arg("--config")
            .arg(&locked.config)
            .arg("--check")
            .envs(env_refs)
            .output()
            .expect("--check");
        assert!(output.status.success(), "--check failed");
        String::from_utf8_lossy(&output.stdout).into_owned()
    };
    assert!(check_output.contains("prometheus"), "{check_output}");
    let printed = locked.process.output();
    assert!(printed.contains("request refused"), "{printed}");
    for secret in &locked.secrets {
        assert!(
            !printed.contains(secret.as_str()),
            "the log shows a secret:\n{printed}"
        );
        assert!(
            !check_output.contains(secret.as_str()),
            "--check shows a secret:\n{check_output}"
        );
    }
}

/// The watchdog alone: it always fires, so a notification is due as soon as the rules run.
const WATCHDOG: &str = "[[rule]]\nname = \"CandorWatchdog\"\nkind = \"watchdog\"\n";

/// Alerts reach an `https://` webhook verified against a private CA
/// (`alerts.webhook_ca_file`), with the `Authorization` header of `alerts.webhook_headers_file`;
/// verified against the system's CAs instead, the same webhook gets nothing and the alert shows
/// undelivered, saying why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alerts_reach_an_https_webhook_through_its_ca_with_the_headers_file() {
    let dir = tempdir("https-webhook");
    let pki = make_pki(&dir);
    let receiver = candor_e2e::dashboards::Receiver::start_tls(&pki).await;
    let token = format!("Bearer hook-{}-{}", std::process::id(), free_port());
    let headers = dir.join("webhook-headers");
    std::fs::write(
        &headers,
        format!("# the receiver's token\nAuthorization: {token}\n"),
    )
    .expect("the headers file");
    let start = |ca: Option<&Path>| {
        let config = dir.join(format!("dashboards-{}.toml", free_port()));
        let ca_line = ca.map_or_else(String::new, |ca| {
            format!("webhook_ca_file = \"{}\"\n", ca.display())
        });
        std::fs::write(
            &config,
            format!(
                "[alerts]\n{ca_line}webhook_headers_file = \"{}\"\n",
                headers.display()
            ),
        )
        .expect("the configuration");
        let mut args = crate::dashboards::fast_args();
        args.extend(["--config".to_owned(), config.display().to_string()]);
        candor_e2e::dashboards::Options {
            rules: Some(WATCHDOG.into()),
            webhooks: vec![receiver.url.clone()],
            args,
            ..candor_e2e::dashboards::Options::default()
        }
    };
    let tables = dir.join("tables");

    // Trusting the private CA: delivered, with the header.
    let trusting =
        candor_e2e::dashboards::Dashboards::start("127.0.0.1:1", &tables, start(Some(&pki.ca)))
            .await;
    wait_for(
        "the watchdog at the HTTPS receiver",
        Duration::from_secs(60),
        || async { (!receiver.authorizations().is_empty()).then_some(()) },
    )
    .await;
    assert!(
        receiver
            .authorizations()
            .iter()
            .all(|a| a.as_deref() == Some(token.as_str())),
        "every notification carries the headers file's Authorization"
    );
    trusting
        .wait_alert("the watchdog delivered", |a| {
            a["name"] == "CandorWatchdog" && a["delivery"] == "delivered"
        })
        .await;
    assert!(
        !trusting.output().contains(&token),
        "the log shows the header's value"
    );
    drop(trusting);

    // The system's CAs do not know the private one: nothing arrives, and the alert says why.
    let received = receiver.authorizations().len();
    let untrusting =
        candor_e2e::dashboards::Dashboards::start("127.0.0.1:1", &tables, start(None)).await;
    let alert = untrusting
        .wait_alert("the watchdog undelivered", |a| {
            a["name"] == "CandorWatchdog" && a["delivery"] == "undelivered"
        })
        .await;
    let reason = alert["reason"].as_str().unwrap_or_default().to_lowercase();
    assert!(reason.contains("certificate"), "{alert}");
    assert_eq!(receiver.authorizations().len(), received, "{alert}");
}
