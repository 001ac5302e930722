//! The README's main command, `deploy/local/up.sh`, in a fresh clone (with `CANDOR_BUILD=debug`:
//! the suite's own build rather than a second, release one): it builds, starts the
//! stack with the demo and the canary on the default ports, the dashboards show every failure
//! kind the demo makes and `candor rates` answers; Ctrl-C (SIGINT) stops every process and frees
//! every port; a second run over the same data directory still holds the first run's events.
//!
//! The clone is of the committed HEAD: uncommitted changes are not in it.

use std::io::{BufRead as _, BufReader};
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use candor_e2e::collector::{get_status, get_status_with};
use candor_e2e::dashboards;
use candor_e2e::{target_dir, tempdir};
use serde_json::Value;

/// The default ports of the stack and the demo.
const PORTS: [u16; 8] = [9092, 4317, 4318, 8888, 8889, 3000, 8181, 8182];

/// `up.sh` running in its own process group, its output collected.
struct Stack {
    child: Child,
    output: Arc<Mutex<String>>,
}

impl Stack {
    fn start(clone: &Path, data: &Path) -> Self {
        // The shared target directory (this binary's `target/debug/..`), so the release build
        // reuses the compiled dependencies.
        let target = target_dir()
            .parent()
            .map(PathBuf::from)
            .expect("target directory");
        // The environment of a person's shell (and of tests/run.sh's own build), not the test
        // runner's: variables the runner sets for tests make cargo compile the dependencies
        // anew instead of reusing the suite's build.
        let kept = [
            "PATH",
            "HOME",
            "LANG",
            "USER",
            "RUSTUP_HOME",
            "CARGO_HOME",
            "CI",
        ];
        let mut command = Command::new("bash");
        command.env_clear();
        for name in kept {
            if let Some(value) = std::env::var_os(name) {
                command.env(name, value);
            }
        }
        let mut child = command
            .arg(clone.join("deploy/local/up.sh"))
            .arg("--data-dir")
            .arg(data)
            .env("RUST_BACKTRACE", "1")
            .env("CARGO_TARGET_DIR", target)
            // The suite's debug build, as tests/run.sh made it: a release build would compile
            // DataFusion once more on a fresh machine.
            .env("CANDOR_BUILD", "debug")
            .current_dir(clone)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn()
            .expect("starting up.sh");
        let output = Arc::new(Mutex::new(String::new()));
        for stream in [
            child
                .stdout
                .take()
                .map(|s| Box::new(s) as Box<dyn std::io::Read + Send>),
            child
                .stderr
                .take()
                .map(|s| Box::new(s) as Box<dyn std::io::Read + Send>),
        ]
        .into_iter()
        .flatten()
        {
            let output = Arc::clone(&output);
            std::thread::spawn(move || {
                for line in BufReader::new(stream).lines().map_while(Result::ok) {
                    let mut all = output.lock().expect("output lock");
                    all.push_str(&line);
                    all.push('\n');
                }
            });
        }
        Self { child, output }
    }

    fn output(&self) -> String {
        self.output.lock().expect("output lock").clone()
    }

    fn group(&self) -> i32 {
        i32::try_from(self.child.id()).expect("pid")
    }

    /// Waits for the banner; the first run includes a release build.
    async fn wait_running(&mut self, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        loop {
            if self.output().contains("Candor is running.") {
                return;
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!(
                    "up.sh exited with {status} before it was running:\n{}",
                    self.output()
                );
            }
            assert!(
                Instant::now() < deadline,
                "up.sh was not running after {timeout:?}:\n{}",
                self.output()
            );
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    /// Ctrl-C: SIGINT to up.sh, then waits for it to exit.
    async fn interrupt(&mut self) {
        let status = Command::new("kill")
            .args(["-INT", &self.child.id().to_string()])
            .status()
            .expect("kill -INT");
        assert!(status.success());
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "up.sh did not exit within 60 s of SIGINT:\n{}",
                self.output()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        // Whatever happened, nothing of this stack outlives the test.
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{}", self.group())])
            .status();
        let _ = self.child.wait();
    }
}

/// The processes of a process group still alive (zombies excluded).
fn members(group: i32) -> Vec<String> {
    let mut alive = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return alive;
    };
    for entry in entries.flatten() {
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // The fields after the command's closing parenthesis: state, ppid, pgrp, …
        let Some((_, rest)) = stat.rsplit_once(") ") else {
            continue;
        };
        let fields: Vec<&str> = rest.split(' ').collect();
        if fields.len() > 2 && fields[2] == group.to_string() && fields[0] != "Z" {
            alive.push(stat.split(") ").next().unwrap_or("").to_owned());
        }
    }
    alive
}

fn port_open(port: u16) -> bool {
    std::net::TcpStream::connect_timeout(
        &std::net::SocketAddr::from(([127, 0, 0, 1], port)),
        Duration::from_millis(200),
    )
    .is_ok()
}

/// `candor` from the stack's build, over its data directory.
fn candor(data: &Path, args: &[&str]) -> (i32, String, String) {
    let binary = target_dir().join("candor");
    let output = Command::new(binary)
        .arg("--data-dir")
        .arg(data)
        .args(args)
        .output()
        .expect("running candor");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

fn stored_events(data: &Path) -> u64 {
    let (code, stdout, stderr) = candor(
        data,
        &[
            "--no-live",
            "--format",
            "json",
            "sql",
            "SELECT count(*) AS n FROM outcome_events",
        ],
    );
    assert!(matches!(code, 0 | 3), "{stdout}\n{stderr}");
    let answer: Value = serde_json::from_str(&stdout).expect("JSON answer");
    answer["envelope"]["outcome"]["payload"]["rows"][0]["n"]
        .as_u64()
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_main_command_runs_the_stack_stops_cleanly_and_keeps_its_data() {
    for port in PORTS {
        assert!(
            !port_open(port),
            "port {port} is taken before the test; it needs the defaults"
        );
    }
    let work = tempdir("stack");
    let clone = work.join("candor");
    let data = work.join("data");
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let status = Command::new("git")
        .args(["clone", "--quiet"])
        .arg(&repo)
        .arg(&clone)
        .status()
        .expect("git clone");
    assert!(status.success(), "git clone failed");

    let mut stack = Stack::start(&clone, &data);
    stack.wait_running(Duration::from_secs(30 * 60)).await;
    // The demo and the canary start after the banner; their ports open shortly after.
    let deadline = Instant::now() + Duration::from_secs(60);
    while let Some(port) = PORTS.iter().find(|port| !port_open(**port)) {
        assert!(
            Instant::now() < deadline,
            "port {port} is not open:\n{}",
            stack.output()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // The dashboards show every failure kind the demo makes, and `candor rates` answers.
    // They are locked: the token up.sh made for scripts reads them, and nothing else does.
    let token = std::fs::read_to_string(data.join("dashboards.token")).expect("up.sh's token");
    let bearer = format!("Bearer {}", token.trim());
    let (status, _) = get_status("127.0.0.1:3000", "/api/overview?range=15m").await;
    assert_eq!(
        status,
        Some(401),
        "the local dashboards answer without a credential"
    );
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        let (_, body) = get_status_with("127.0.0.1:3000", "/api/overview?range=15m", &bearer).await;
        let overview: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
        if dashboards::shows_failure_kinds(&overview, &dashboards::DEMO_FAILURE_KINDS) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "not every failure kind on the dashboards: {}\n{}",
            overview["failures"],
            stack.output()
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let (code, stdout, stderr) =
            candor(&data, &["rates", "--since", "15m", "--format", "json"]);
        let answer: Value = serde_json::from_str(&stdout).unwrap_or(Value::Null);
        let rows = answer["envelope"]["outcome"]["payload"]["rows"]
            .as_array()
            .map_or(0, Vec::len);
        if matches!(code, 0 | 3) && rows > 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "candor rates returned no rows (exit {code}):\n{stdout}\n{stderr}"
        );
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    // Events reach the table (files every 60 s at the default settings).
    let deadline = Instant::now() + Duration::from_secs(180);
    let stored = loop {
        let stored = stored_events(&data);
        if stored > 0 {
            break stored;
        }
        assert!(
            Instant::now() < deadline,
            "no event stored:\n{}",
            stack.output()
        );
        tokio::time::sleep(Duration::from_secs(3)).await;
    };

    // Ctrl-C stops everything and frees every port.
    let group = stack.group();
    stack.interrupt().await;
    let left = members(group);
    assert!(
        left.is_empty(),
        "processes left after Ctrl-C: {left:?}\n{}",
        stack.output()
    );
    for port in PORTS {
        assert!(!port_open(port), "port {port} is still bound after Ctrl-C");
    }

    // A second run over the same data directory holds the first run's events.
    let mut again = Stack::start(&clone, &data);
    again.wait_running(Duration::from_secs(10 * 60)).await;
    let kept = stored_events(&data);
    assert!(
        kept >= stored,
        "{kept} events stored after the restart, {stored} before"
    );
    let (_, body) = get_status("127.0.0.1:3000", "/readyz").await;
    assert!(body.contains("ready"), "{body}");
    again.interrupt().await;
    assert!(members(again.group()).is_empty());
    let _ = std::fs::remove_dir_all(&work);
}

#[test]
fn the_deployment_files_parse_and_agree_with_the_binaries() {
    // deploy_check.py: every manifest, config and the Dockerfile, cross-checked.
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let output = Command::new(candor_e2e::python())
        .arg(repo.join("tests/e2e/clients/deploy_check.py"))
        .current_dir(&repo)
        .output()
        .expect("running deploy_check.py");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains(" passed, 0 failed"), "{stdout}");
    assert!(
        !stdout.contains("skipped"),
        "a check was skipped:\n{stdout}"
    );
}

/// The production configs under deploy/config/ through the binaries' own `--check`: what the
/// binary would do with them at start, not what a parser thinks of their keys.
#[test]
fn the_deployment_configs_pass_the_binaries_own_check() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let config = |name: &str| repo.join("deploy/config").join(name);
    let dir = tempdir("deploy-check");
    let run = |program: &str, args: &[&str], env: &[(&str, &str)]| {
        let output = Command::new(target_dir().join(program))
            .args(args)
            .env_clear()
            .envs(env.iter().copied())
            .output()
            .unwrap_or_else(|err| panic!("running {program}: {err}"));
        let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
        (
            output.status.code().unwrap_or(-1),
            text(&output.stdout),
            text(&output.stderr),
        )
    };
    const PASSWORD: &str = "kafka-password-not-to-be-printed";
    let password = ("CANDOR_KAFKA_SASL_PASSWORD", PASSWORD);

    // The compactor's: valid as it stands (its s3:// root has a store in this build; the check
    // connects to nothing) and with a local root; a root of a store this build lacks is refused;
    // the password's variable is required.
    let compactor = config("compactor.s3.toml").display().to_string();
    let check = ["compact", "--check", "--config", compactor.as_str()];
    let (code, stdout, stderr) = run("candor-collector", &check, &[password]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("configuration OK"), "{stdout}");
    let unknown = ("CANDOR_TABLE_ROOT", "gs://candor-tables/prefix");
    let (code, _, stderr) = run("candor-collector", &check, &[password, unknown]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("table_root gs://"), "{stderr}");
    let root = dir.join("tables").display().to_string();
    let local = ("CANDOR_TABLE_ROOT", root.as_str());
    let (code, stdout, stderr) = run("candor-collector", &check, &[password, local]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("configuration OK"), "{stdout}");
    assert!(!stdout.contains(PASSWORD) && !stderr.contains(PASSWORD));
    let (code, _, stderr) = run("candor-collector", &check, &[local]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("CANDOR_KAFKA_SASL_PASSWORD"), "{stderr}");
    let maintain = ["maintain", "--check", "--config", compactor.as_str()];
    let (code, _, stderr) = run("candor-collector", &maintain, &[local]);
    assert_eq!(code, 0, "{stderr}");

    // The collector's, with its TLS files where a pod mounts them moved under the temp dir.
    let text = std::fs::read_to_string(config("collector.kafka-sasl-tls.toml")).unwrap();
    let (cert, key) = (dir.join("tls.crt"), dir.join("tls.key"));
    std::fs::write(&cert, "certificate").unwrap();
    std::fs::write(&key, "key").unwrap();
    let moved = text
        .replace("/etc/candor/otlp-tls/tls.crt", &cert.display().to_string())
        .replace("/etc/candor/otlp-tls/tls.key", &key.display().to_string());
    assert_ne!(
        moved, text,
        "the collector's config no longer names its TLS files"
    );
    let collector = dir.join("collector.toml");
    std::fs::write(&collector, moved).unwrap();
    let collector = collector.display().to_string();
    let check = ["ingest", "--check", "--config", collector.as_str()];
    let token = ("CANDOR_OTLP_TOKEN", "otlp-token-not-to-be-printed");
    let (code, stdout, stderr) = run("candor-collector", &check, &[password, token]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        !stdout.contains(PASSWORD) && !stdout.contains(token.1),
        "{stdout}"
    );
    let (code, _, stderr) = run("candor-collector", &check, &[password]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("CANDOR_OTLP_TOKEN"), "{stderr}");

    // The readers' Kafka settings, loaded by `candor` (the dashboards load them the same way):
    // a missing password stops it as a usage error naming the variable.
    let readers = config("dashboards-kafka.toml").display().to_string();
    let args = [
        "--kafka-config",
        readers.as_str(),
        "--tables",
        root.as_str(),
        "--no-live",
        "sql",
        "SELECT 1",
    ];
    let (code, _, stderr) = run("candor", &args, &[]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("CANDOR_KAFKA_SASL_PASSWORD"), "{stderr}");
    let (code, _, stderr) = run("candor", &args, &[password]);
    assert_ne!(code, 2, "{stderr}");

    // The dashboards' example config with the same readers' settings over its Kafka tables,
    // through their own `--check`: valid with the password's variable set, which is never
    // printed; refused without it, naming it.
    let example = repo
        .join("deploy/dashboards.example.toml")
        .display()
        .to_string();
    let check = [
        "--check",
        "--config",
        example.as_str(),
        "--kafka-config",
        readers.as_str(),
    ];
    let (code, stdout, stderr) = run("candor-dashboards", &check, &[password]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("configuration OK"), "{stdout}");
    assert!(
        stdout.contains("SASL_SSL"),
        "the settings file's tables: {stdout}"
    );
    assert!(!stdout.contains(PASSWORD) && !stderr.contains(PASSWORD));
    let (code, _, stderr) = run("candor-dashboards", &check, &[]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("CANDOR_KAFKA_SASL_PASSWORD"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}
