//! A child process that is killed when dropped, with its output kept for failure reports.

use std::path::Path;
use std::process::Stdio;

use tokio::process::{Child, Command};

/// A running child process; killed (SIGKILL) on drop.
pub struct Running {
    name: String,
    child: Child,
    log: std::path::PathBuf,
}

impl Running {
    /// Starts `program` with `args`, its output going to a log file in the temp directory.
    pub fn spawn(name: &str, program: &Path, args: &[String], envs: &[(&str, &str)]) -> Self {
        Self::spawn_in(None, name, program, args, envs)
    }

    /// Like [`Running::spawn`], in the working directory `dir` when given.
    pub fn spawn_in(
        dir: Option<&Path>,
        name: &str,
        program: &Path,
        args: &[String],
        envs: &[(&str, &str)],
    ) -> Self {
        // One file per start, so that a restarted process leaves its earlier log to read.
        static STARTS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let start = STARTS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let log = std::env::temp_dir().join(format!(
            "candor-e2e-{name}-{}-{start}.log",
            std::process::id()
        ));
        let file = std::fs::File::create(&log)
            .unwrap_or_else(|err| panic!("creating {}: {err}", log.display()));
        let stderr = file
            .try_clone()
            .unwrap_or_else(|err| panic!("log file: {err}"));
        let mut command = Command::new(program);
        command
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::from(file))
            .stderr(Stdio::from(stderr))
            .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
            .kill_on_drop(true);
        for (key, value) in envs {
            command.env(key, value);
        }
        if let Some(dir) = dir {
            command.current_dir(dir);
        }
        let child = command
            .spawn()
            .unwrap_or_else(|err| panic!("starting {name} ({}): {err}", program.display()));
        Self {
            name: name.to_owned(),
            child,
            log,
        }
    }

    /// What the process has written so far.
    pub fn output(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The process id.
    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// Kills the process and waits for it to exit.
    pub async fn kill(&mut self) {
        let _ = self.child.kill().await;
    }

    /// Sends `signal` (as `kill` names it: `STOP`, `CONT`, ...) and waits for `kill` to return.
    pub async fn signal(&self, signal: &str) {
        let pid = self.child.id().expect("the process is running");
        let status = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(pid.to_string())
            .status()
            .await
            .expect("the kill command runs");
        assert!(status.success(), "kill -{signal} {pid} failed");
    }

    /// Sends SIGTERM and waits for the process to exit; returns its exit code.
    pub async fn terminate(&mut self) -> Option<i32> {
        if let Some(pid) = self.child.id() {
            let _ = Command::new("kill")
                .arg("-TERM")
                .arg(pid.to_string())
                .status()
                .await;
        }
        self.child
            .wait()
            .await
            .ok()
            .and_then(|status| status.code())
    }

    /// Whether the process has exited.
    pub fn exited(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(Some(_)))
    }

    /// The process's name in reports.
    pub fn name(&self) -> &str {
        &self.name
    }
}

/// Runs `command` to its end and returns its output; panics, naming `what` and quoting its
/// stderr, when it cannot be started or exits unsuccessfully.
pub fn succeeded(command: &mut std::process::Command, what: &str) -> std::process::Output {
    let output = command
        .output()
        .unwrap_or_else(|err| panic!("running {what}: {err}"));
    assert!(
        output.status.success(),
        "{what} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    output
}
