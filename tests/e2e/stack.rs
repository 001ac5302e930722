//! The README's main command, `deploy/local/up.sh`, in a fresh clone (with `CANDOR_BUILD=debug`:
//! the suite's own build rather than a second, release one): it builds, starts the
//! stack with the demo and the canary on the default ports, the dashboards show every failure
//! kind the demo makes and `candor rates` answers; Ctrl-C (SIGINT) stops every process and frees
//! every port; a second run over the same data directory still holds the first run's events.
//!
//! What up.sh prints once it runs is held to what it started: the tables it names are those
//! under the stack's table root, which are the pipeline's ([`Table::ALL`]); the demo tools it
//! lists answer, and are the tools the demo calls; the scenarios it lists are those the demo
//! accepts and names; the commands it suggests run.
//!
//! The clone is of the committed HEAD: uncommitted changes are not in it.

use std::collections::BTreeSet;
use std::io::{BufRead as _, BufReader};
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use candor_e2e::collector::{get_status, get_status_with, post};
use candor_e2e::dashboards;
use candor_e2e::process::Running;
use candor_e2e::{free_port, target_dir, tempdir, wait_for, wait_for_port};
use candor_records::tables::Table;
use serde_json::Value;

/// The default ports of the stack and the demo.
const PORTS: [u16; 8] = [9092, 4317, 4318, 8888, 8889, 3000, 8181, 8182];

/// The last line of up.sh's summary: once it is out, the whole summary is.
const SUMMARY_END: &str = "Ctrl-C stops everything.";

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

    /// Waits for the whole summary; the first run includes the build.
    async fn wait_running(&mut self, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        loop {
            if self.output().contains(SUMMARY_END) {
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

/// The section `label` of up.sh's summary in `output`: the text of its labelled line and of the
/// unlabelled lines under it (up.sh's `summary`: two spaces, the label in 16 columns, a space).
fn section(output: &str, label: &str) -> Vec<String> {
    let summary = output
        .split_once("Candor is running.\n")
        .map_or("", |(_, summary)| summary);
    let head = format!("  {label:<16} ");
    let blank = " ".repeat(head.len());
    let mut lines = summary.lines().skip_while(|line| !line.starts_with(&head));
    let Some(first) = lines.next().and_then(|line| line.strip_prefix(&head)) else {
        return Vec::new();
    };
    std::iter::once(first)
        .chain(lines.map_while(|line| line.strip_prefix(&blank)))
        .map(|text| text.trim().to_owned())
        .collect()
}

/// The table root and the tables the summary names: `ROOT  (name, name, ...)`.
fn printed_tables(output: &str) -> (PathBuf, BTreeSet<String>) {
    let lines = section(output, "tables");
    let parsed = match lines.as_slice() {
        [line] => line
            .split_once("  (")
            .and_then(|(root, names)| Some((root, names.strip_suffix(')')?))),
        _ => None,
    };
    let (root, names) =
        parsed.unwrap_or_else(|| panic!("no `tables  ROOT  (names)` in the summary:\n{output}"));
    (
        PathBuf::from(root),
        names.split(", ").map(str::to_owned).collect(),
    )
}

/// The Delta tables under `root`: its directories with a `_delta_log`.
fn tables_under(root: &Path) -> BTreeSet<String> {
    std::fs::read_dir(root)
        .unwrap_or_else(|err| panic!("reading {}: {err}", root.display()))
        .flatten()
        .filter(|entry| entry.path().join("_delta_log").is_dir())
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .collect()
}

/// The tables the summary names are those under the stack's table root, and those are the
/// pipeline's.
fn assert_printed_tables(output: &str, data: &Path) {
    let (root, printed) = printed_tables(output);
    let tables = data.join("tables");
    let canonical = |path: &Path| {
        std::fs::canonicalize(path).unwrap_or_else(|err| panic!("{}: {err}", path.display()))
    };
    assert_eq!(
        canonical(&root),
        canonical(&tables),
        "the summary's table root:\n{output}"
    );
    let created = tables_under(&tables);
    assert_eq!(
        printed,
        created,
        "the tables the summary names, against those under {}",
        tables.display()
    );
    let pipeline: BTreeSet<String> = Table::ALL
        .iter()
        .map(|table| table.name().to_owned())
        .collect();
    assert_eq!(
        created,
        pipeline,
        "the tables under {}, against the pipeline's",
        tables.display()
    );
}

/// The demo tools the summary lists, as (method, URL): `METHOD URL what it does`.
fn printed_tools(output: &str) -> Vec<(String, String)> {
    let tools: Vec<(String, String)> = section(output, "demo tools")
        .iter()
        .map(|line| {
            let mut words = line.split_whitespace();
            match (words.next(), words.next()) {
                (Some(method @ ("GET" | "POST")), Some(url)) if url.starts_with("http://") => {
                    (method.to_owned(), url.to_owned())
                }
                _ => panic!("not `METHOD URL what it does`: {line:?}"),
            }
        })
        .collect();
    assert!(!tools.is_empty(), "no demo tools in the summary:\n{output}");
    tools
}

/// `http://host:port/path` as (`host:port`, `/path`).
fn address_and_path(url: &str) -> (&str, &str) {
    let rest = url
        .strip_prefix("http://")
        .unwrap_or_else(|| panic!("not an http:// URL: {url}"));
    rest.split_at(rest.find('/').unwrap_or(rest.len()))
}

/// The targets whose calls the `tool.outcomes` counters counted, from the tables and the tail.
fn counted_targets(data: &Path) -> BTreeSet<String> {
    let (code, stdout, stderr) = candor(
        data,
        &[
            "--format",
            "json",
            "sql",
            "SELECT DISTINCT tool_target FROM outcome_counts",
        ],
    );
    assert!(matches!(code, 0 | 1 | 3), "{stdout}\n{stderr}");
    let answer: Value = serde_json::from_str(&stdout).unwrap_or(Value::Null);
    answer["envelope"]["outcome"]["payload"]["rows"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|row| row["tool_target"].as_str().map(str::to_owned))
        .collect()
}

/// The control address and the scenarios the summary lists:
/// `curl -X POST http://ADDRESS/scenario/NAME  (what it does)`.
fn printed_scenarios(output: &str) -> (String, Vec<String>) {
    let mut addresses = BTreeSet::new();
    let mut names = Vec::new();
    for line in section(output, "scenarios") {
        let url = line
            .strip_prefix("curl -X POST ")
            .and_then(|rest| rest.split_whitespace().next())
            .unwrap_or_else(|| panic!("not `curl -X POST URL (what it does)`: {line:?}"));
        let (address, path) = address_and_path(url);
        let name = path
            .strip_prefix("/scenario/")
            .unwrap_or_else(|| panic!("not a scenario's URL: {url}"));
        addresses.insert(address.to_owned());
        names.push(name.to_owned());
    }
    assert!(!names.is_empty(), "no scenarios in the summary:\n{output}");
    assert_eq!(
        addresses.len(),
        1,
        "the scenarios are switched at one address: {addresses:?}"
    );
    let address = addresses.pop_first().expect("one address");
    (address, names)
}

/// The state letter of process `pid` (`T` when stopped), from /proc.
fn process_state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(") ")?.1.chars().next()
}

/// The scenarios the summary lists are those `candor demo` accepts, and it knows no other. They
/// are switched in a demo of its own on free ports, whose collector is a stand-in process, so
/// that the outage pauses the stand-in rather than the stack's collector.
async fn assert_scenarios_are_the_demos(scenarios: &[String]) {
    let mut stand_in = Running::spawn(
        "stand-in-collector",
        Path::new("sleep"),
        &["600".to_owned()],
        &[],
    );
    let pid = stand_in.pid().expect("the stand-in's pid");
    let control = format!("127.0.0.1:{}", free_port());
    let args = [
        "demo".to_owned(),
        "--rate".to_owned(),
        "0.2".to_owned(),
        "--tools-addr".to_owned(),
        format!("127.0.0.1:{}", free_port()),
        "--control-addr".to_owned(),
        control.clone(),
        // Nothing listens there: this demo's telemetry goes nowhere.
        "--otlp-endpoint".to_owned(),
        format!("http://127.0.0.1:{}", free_port()),
        "--collector-pid".to_owned(),
        pid.to_string(),
    ];
    let mut demo = Running::spawn("demo", &target_dir().join("candor"), &args, &[]);
    wait_for_port(
        "the scenario control of the demo of its own",
        &control,
        Duration::from_secs(60),
    )
    .await;
    for name in scenarios {
        let (status, body) = post(&control, &format!("/scenario/{name}")).await;
        assert_eq!(
            (status, body.trim()),
            (Some(200), name.as_str()),
            "switching to the listed scenario {name}:\n{}",
            demo.output()
        );
        let (_, current) = get_status(&control, "/scenario").await;
        assert_eq!(
            current.trim(),
            name,
            "the scenario after switching to {name}"
        );
    }
    // The outage the summary lists paused the process the demo was told is the collector. The
    // kernel stops it when it next runs to take the signal: on a busy machine it can still be
    // runnable just after `kill` returned.
    let paused = format!("a listed scenario to pause the collector: {scenarios:?}");
    wait_for(&paused, Duration::from_secs(30), || async {
        (process_state(pid) == Some('T')).then_some(())
    })
    .await;
    // The demo's refusal of a scenario it does not know names every one it does.
    let (status, refusal) = post(&control, "/scenario/no-such-scenario").await;
    assert_eq!(status, Some(404), "{refusal}");
    let known: BTreeSet<&str> = refusal
        .split_once("try ")
        .map(|(_, names)| names.trim())
        .unwrap_or_else(|| panic!("the refusal names no scenario: {refusal:?}"))
        .split(", ")
        .flat_map(|names| names.split(" or "))
        .collect();
    let listed: BTreeSet<&str> = scenarios.iter().map(String::as_str).collect();
    assert_eq!(
        known, listed,
        "the scenarios the demo names ({refusal:?}), against the summary's"
    );
    demo.kill().await;
    stand_in.kill().await;
}

/// The commands the summary suggests run: `candor` answers (0, 1 or 3: never a usage error or
/// no source read), and asks about a listed tool when it names a target; the topic reader prints
/// records.
fn assert_printed_commands_run(output: &str, tools: &BTreeSet<&str>) {
    let questions = section(output, "ask");
    let reader = section(output, "read a topic");
    assert!(
        !questions.is_empty() && reader.len() == 1,
        "no questions or topic reader in the summary:\n{output}"
    );
    for command in questions.iter().chain(&reader) {
        let words: Vec<&str> = command.split_whitespace().collect();
        let (program, args) = words.split_first().expect("a command");
        if let Some(target) = words.iter().skip_while(|word| **word != "--target").nth(1) {
            assert!(
                tools.contains(target),
                "`{command}` asks about {target}, which is no listed tool"
            );
        }
        let ran = Command::new(program)
            .args(args)
            .output()
            .unwrap_or_else(|err| panic!("running `{command}`: {err}"));
        let code = ran.status.code().unwrap_or(-1);
        let stdout = String::from_utf8_lossy(&ran.stdout);
        let stderr = String::from_utf8_lossy(&ran.stderr);
        let answered = if program.ends_with("/candor-collector") {
            code == 0 && stdout.lines().next().is_some()
        } else {
            matches!(code, 0 | 1 | 3)
        };
        assert!(answered, "`{command}` exited {code}:\n{stdout}\n{stderr}");
    }
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
    // The summary names the tables as they are when it is printed.
    assert_printed_tables(&stack.output(), &data);
    // Every port of the stack opens (the canary, started last, has none).
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

    // The demo tools the summary lists answer, by the method it lists: any answer but "no such
    // path" or "not that method", since they fail on purpose (`/slow` answers after 10 s).
    let output = stack.output();
    let tools = printed_tools(&output);
    for (method, url) in &tools {
        let (address, path) = address_and_path(url);
        let (status, body) = if method == "GET" {
            get_status(address, path).await
        } else {
            post(address, path).await
        };
        assert!(
            status.is_some_and(|status| status != 404 && status != 405),
            "{method} {url}, which the summary lists, answered {status:?}: {body}"
        );
    }
    // They are the tools the demo calls: the counters count calls of each, and of no other tool
    // at their addresses (a status URL under a tool's own is that tool's).
    let urls: BTreeSet<&str> = tools.iter().map(|(_, url)| url.as_str()).collect();
    let counted = {
        let (data, urls) = (data.as_path(), &urls);
        wait_for(
            &format!("the counters to count calls of every listed tool: {urls:?}"),
            Duration::from_secs(120),
            move || async move {
                let counted = counted_targets(data);
                urls.iter()
                    .all(|url| counted.contains(*url))
                    .then_some(counted)
            },
        )
        .await
    };
    let addresses: BTreeSet<&str> = urls.iter().map(|url| address_and_path(url).0).collect();
    let unlisted: Vec<&String> = counted
        .iter()
        .filter(|target| {
            target
                .strip_prefix("http://")
                .and_then(|rest| rest.split('/').next())
                .is_some_and(|address| addresses.contains(address))
                && !urls
                    .iter()
                    .any(|url| target.as_str() == *url || target.starts_with(&format!("{url}/")))
        })
        .collect();
    assert!(
        unlisted.is_empty(),
        "the demo calls tools the summary does not list: {unlisted:?}\nlisted: {urls:?}"
    );
    // The scenarios it lists: the stack's control answers at their address, in one of them, and
    // they are the demo's.
    let (control, scenarios) = printed_scenarios(&output);
    let (status, current) = get_status(&control, "/scenario").await;
    assert_eq!(
        status,
        Some(200),
        "the scenario control at {control}: {current}"
    );
    assert!(
        scenarios.iter().any(|name| name == current.trim()),
        "the demo runs {current:?}, which the summary does not list: {scenarios:?}"
    );
    assert_scenarios_are_the_demos(&scenarios).await;
    assert_printed_commands_run(&output, &urls);

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
    assert_printed_tables(&again.output(), &data);
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
