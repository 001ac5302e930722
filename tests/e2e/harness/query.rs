//! The `candor` CLI as a person runs it: a fresh process per question, its exit code, its
//! stdout (JSON unless told otherwise) and its stderr.

use std::path::Path;
use std::process::Command;

use crate::target_dir;

/// What one `candor` run gave.
#[derive(Debug)]
pub struct Answer {
    /// The exit code (0 rows, 1 confirmed empty, 2 usage, 3 partial, 4 access failure).
    pub code: i32,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

impl Answer {
    /// Stdout as JSON (`--format json`, the default when stdout is not a terminal).
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|err| {
            panic!(
                "candor printed no JSON ({err}):\n{}\nstderr:\n{}",
                self.stdout, self.stderr
            )
        })
    }

    /// The answer's rows (the envelope's payload), empty for an answer without a payload.
    pub fn rows(&self) -> Vec<serde_json::Value> {
        self.json()["envelope"]["outcome"]["payload"]["rows"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    /// The answer's class, from its envelope.
    pub fn class(&self) -> String {
        self.json()["envelope"]["outcome"]["class"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    /// The coverage report of a source by name (`table outcome_events`, `kafka …`).
    pub fn source(&self, name: &str) -> serde_json::Value {
        let json = self.json();
        json["coverage"]["sources"]
            .as_array()
            .and_then(|sources| sources.iter().find(|s| s["name"] == name).cloned())
            .unwrap_or_else(|| panic!("no source {name:?} in {json:#}"))
    }
}

/// Runs `candor` with the tables under `root` and `args`; the environment is cleared of the
/// variables that would point it elsewhere.
pub fn candor(root: &Path, args: &[&str]) -> Answer {
    candor_with_env(root, args, &[])
}

/// [`candor`] with environment variables set.
pub fn candor_with_env(root: &Path, args: &[&str], env: &[(&str, &str)]) -> Answer {
    let binary = target_dir().join("candor");
    assert!(binary.exists(), "{} is missing", binary.display());
    let output = Command::new(&binary)
        .arg("--tables")
        .arg(root)
        .args(args)
        .env_remove("CANDOR_DATA_DIR")
        .env_remove("CANDOR_TABLES")
        .env_remove("CANDOR_KAFKA")
        .env_remove("CANDOR_KAFKA_CONFIG")
        .envs(env.iter().copied())
        .output()
        .unwrap_or_else(|err| panic!("running candor: {err}"));
    Answer {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// `EXPLAIN ANALYZE` of counting one target's events on one day (`YYYY-MM-DD`), as CSV, with
/// `args` added: the plan and its pruning metrics are in `stdout`.
pub fn explain_day_and_target(root: &Path, day: &str, target: &str, args: &[&str]) -> Answer {
    let statement = format!(
        "EXPLAIN ANALYZE SELECT count(*) FROM outcome_events WHERE date = DATE '{day}' \
         AND tool_target = '{target}'"
    );
    candor(
        root,
        &[&["sql", statement.as_str(), "--format", "csv"], args].concat(),
    )
}
