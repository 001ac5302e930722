//! Every test that RELIABILITY.md names exists.
//!
//! The page lists the tests behind each guarantee one file a line:
//!
//! ```text
//! - `collector/src/error.rs`: `only_unavailable_is_retryable_and_carries_retry_hints`
//! - `tests/e2e/faults.rs`: `every_acknowledged_event_survives_a_kill_9_of_the_collector`,
//!   `a_broker_crash_mid_stream_gets_retryable_answers_and_loses_no_acknowledged_event`
//!   (seed: `CANDOR_FAULT_SEED`)
//! ```
//!
//! The path is relative to the repository root; the names may wrap onto continuation lines until
//! the next list item or a blank line; text in parentheses is a note, not a name. This test reads
//! every such line and checks that the file exists and defines `fn <name>(`, so a renamed or
//! deleted test cannot stay on the page. It needs no broker and no build of the services:
//!
//! ```text
//! cargo nextest run -p candor-e2e --test docs
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Fewer names than this means the page's format changed and the parser found nothing to check.
const AT_LEAST: usize = 50;

/// One test the page names.
#[derive(Debug, Clone, PartialEq, Eq)]
struct NamedTest {
    /// The file, relative to the repository root.
    path: String,
    /// The test function's name.
    name: String,
}

/// The repository root: the parent of this package's directory (`tests/`).
fn repository_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Every test `page` names, in the order it names them.
fn named_tests(page: &str) -> Vec<NamedTest> {
    test_lines(page)
        .into_iter()
        .flat_map(|(path, text)| {
            names(&text).into_iter().map(move |name| NamedTest {
                path: path.clone(),
                name,
            })
        })
        .collect()
}

/// The page's test lines: each one's path and the text after its colon, with its continuation
/// lines joined on.
fn test_lines(page: &str) -> Vec<(String, String)> {
    let mut lines = Vec::new();
    let mut current: Option<(String, String)> = None;
    for line in page.lines().map(str::trim) {
        if let Some((path, text)) = test_line_start(line) {
            lines.extend(current.take());
            current = Some((path.to_owned(), text.to_owned()));
        } else if line.is_empty() || starts_list_item(line) {
            lines.extend(current.take());
        } else if let Some((_, text)) = current.as_mut() {
            text.push(' ');
            text.push_str(line);
        }
    }
    lines.extend(current);
    lines
}

/// The path and the rest of a line that starts a test line, `` - `path.rs`: … ``.
fn test_line_start(line: &str) -> Option<(&str, &str)> {
    let rest = line.strip_prefix("- `")?;
    let (path, rest) = rest.split_once('`')?;
    let text = rest.strip_prefix(':')?;
    path.ends_with(".rs").then_some((path, text))
}

/// True when `line` starts a list item: `- …`, `* …` or `12. …`.
fn starts_list_item(line: &str) -> bool {
    let numbered = line.split_once(". ").is_some_and(|(number, _)| {
        !number.is_empty() && number.bytes().all(|b| b.is_ascii_digit())
    });
    line.starts_with("- ") || line.starts_with("* ") || numbered
}

/// The backticked names in `text`, leaving out everything inside parentheses.
fn names(text: &str) -> Vec<String> {
    let mut outside = String::new();
    let mut depth = 0usize;
    for c in text.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            _ if depth == 0 => outside.push(c),
            _ => {}
        }
    }
    // Split on backticks, the odd pieces are the quoted ones.
    outside
        .split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect()
}

/// True when `source` defines a function `name` (a `#[test]`, or a test inside `proptest!`).
fn defines(source: &str, name: &str) -> bool {
    source.contains(&format!("fn {name}("))
}

/// What is wrong with each named test that does not exist under `root`, one line each.
fn missing_tests(root: &Path, tests: &[NamedTest]) -> Vec<String> {
    let mut sources: BTreeMap<&str, Option<String>> = BTreeMap::new();
    let mut missing = Vec::new();
    for test in tests {
        let source = sources
            .entry(test.path.as_str())
            .or_insert_with(|| std::fs::read_to_string(root.join(&test.path)).ok());
        match source.as_deref() {
            None => missing.push(format!(
                "{}: no such file (naming `{}`)",
                test.path, test.name
            )),
            Some(text) if !defines(text, &test.name) => {
                missing.push(format!("{}: no `fn {}(`", test.path, test.name));
            }
            Some(_) => {}
        }
    }
    missing
}

#[test]
fn every_test_reliability_md_names_exists() {
    let root = repository_root();
    let page_path = root.join("RELIABILITY.md");
    let page = std::fs::read_to_string(&page_path)
        .unwrap_or_else(|err| panic!("reading {}: {err}", page_path.display()));
    let tests = named_tests(&page);
    assert!(
        tests.len() >= AT_LEAST,
        "RELIABILITY.md names {} tests, fewer than {AT_LEAST}: has the format of its test lines \
         (- `path.rs`: `name`, `name`) changed?",
        tests.len()
    );
    let missing = missing_tests(&root, &tests);
    assert!(
        missing.is_empty(),
        "RELIABILITY.md names {} of its {} tests that do not exist; rename them on the page or \
         restore them:\n{}",
        missing.len(),
        tests.len(),
        missing.join("\n")
    );
}

#[test]
fn test_lines_wrap_until_the_next_item_and_notes_are_not_names() {
    let page = "\
1. **A guarantee.** Text with `code` that is not a test line.
   - `a/b.rs`: `first`,
     `second` (seed: `NOT_A_NAME`)
   - Run: `cargo nextest run first second`
   - `c/d.rs`: `third`

   `after_a_blank_line`
2. **Next.** `not_a_name_either`
- `README.md`: `not_a_rust_file`
";
    let found: Vec<(String, String)> = named_tests(page)
        .into_iter()
        .map(|test| (test.path, test.name))
        .collect();
    let expected: Vec<(String, String)> = [
        ("a/b.rs", "first"),
        ("a/b.rs", "second"),
        ("c/d.rs", "third"),
    ]
    .into_iter()
    .map(|(path, name)| (path.to_owned(), name.to_owned()))
    .collect();
    assert_eq!(found, expected);
}

#[test]
fn a_name_must_be_defined_whole() {
    let source = "fn a_test_that_is_longer() {}\nasync fn an_async_test() {}\n";
    assert!(defines(source, "an_async_test"));
    assert!(!defines(source, "a_test"));
    assert!(!defines(source, "test_that_is_longer"));
}

#[test]
fn a_missing_file_and_a_missing_function_are_both_reported() {
    let root = repository_root();
    let tests = [
        NamedTest {
            path: "RELIABILITY.md.does-not-exist.rs".to_owned(),
            name: "anything".to_owned(),
        },
        NamedTest {
            path: "tests/docs/reliability.rs".to_owned(),
            name: "no_such_test_in_this_file".to_owned(),
        },
        NamedTest {
            path: "tests/docs/reliability.rs".to_owned(),
            name: "every_test_reliability_md_names_exists".to_owned(),
        },
    ];
    assert_eq!(missing_tests(&root, &tests).len(), 2);
}
