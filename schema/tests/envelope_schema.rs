//! The committed JSON Schema and example envelopes (validated by the Python suite's own
//! validator), reading and writing envelopes, and the MCP rendering.

// The contract's code does no I/O and reads no clock (schema/clippy.toml); this test does:
// it reads (and blesses) the committed schema and builds envelopes at
// the current time.
#![allow(clippy::disallowed_methods)]
#![allow(clippy::unwrap_used)] // a panic in a test or a benchmark set-up is its failure report

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use candor_schema::*;
use serde_json::{Value, json};

fn committed_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../spec/v1/envelope.v1.schema.json")
}

fn at(seconds: u64) -> Timestamp {
    Timestamp::new(SystemTime::UNIX_EPOCH + Duration::from_secs(1_790_000_000 + seconds))
}

fn attempt(number: u32, class: OutcomeClass) -> Attempt {
    Attempt {
        number,
        started_at: at(u64::from(number)),
        duration_ms: 12,
        class,
        failure_kind: None,
        status: Some(200),
        retry_action: None,
        backoff_ms: None,
        error_type: None,
    }
}

fn envelope(
    outcome: Outcome<Value>,
    attempts: Vec<Attempt>,
    lifecycle: Option<Lifecycle>,
) -> Envelope<Value> {
    Envelope::new(EnvelopeParts {
        tool: Arc::from("search"),
        target: Arc::from("https://search.example/v1/items"),
        outcome,
        authority: Some(Authority {
            principal: Some(Arc::from("svc-orders")),
            scope: Some(Arc::from("read:items")),
        }),
        provenance: Provenance {
            source_system: Arc::from("search.example"),
            actor: Some(Arc::from("orders-api")),
            adapter: "candor-adapter/0.1.0".into(),
            started_at: at(0),
            finished_at: at(5),
        },
        evidence: Some(Evidence {
            kind: EvidenceKind::RequestId,
            value: "req-42".into(),
        }),
        attempts,
        lifecycle,
    })
}

/// One example envelope of each class.
fn examples() -> Vec<Envelope<Value>> {
    let failed = Attempt {
        class: OutcomeClass::AccessFailure,
        failure_kind: Some(FailureKind::ServerError),
        status: Some(503),
        retry_action: Some(RetryAction::Retry),
        backoff_ms: Some(250),
        error_type: Some("503".into()),
        ..attempt(1, OutcomeClass::AccessFailure)
    };
    vec![
        envelope(
            Outcome::Success {
                payload: json!({"items": [1, 2]}),
                extent: Extent {
                    items: Some(2),
                    declared_total: Some(2),
                    scope: Some("index items".into()),
                },
            },
            vec![failed.clone(), attempt(2, OutcomeClass::Success)],
            None,
        ),
        envelope(
            Outcome::Empty {
                extent: Extent {
                    items: Some(0),
                    ..Extent::default()
                },
            },
            vec![attempt(1, OutcomeClass::Empty)],
            None,
        ),
        envelope(
            Outcome::Partial {
                payload: json!({"items": [1, 2, 3], "total": 10}),
                truncation: Truncation {
                    kind: PartialKind::DeclaredTotal,
                    covered: "items 1-3 of 10".into(),
                    dropped: "7 items".into(),
                    returned: Some(3),
                    expected: Some(10),
                },
            },
            vec![attempt(1, OutcomeClass::Partial)],
            None,
        ),
        envelope(
            Outcome::AccessFailure {
                failure: Failure {
                    kind: AccessFailureKind::ServerError,
                    retryable: true,
                    message: "HTTP 503 Service Unavailable".into(),
                    status: Some(503),
                    error_type: Some("503".into()),
                    retry_after_ms: Some(1000),
                },
            },
            vec![failed.clone(), failed],
            None,
        ),
        envelope(
            Outcome::Success {
                payload: json!({"job": "j-7"}),
                extent: Extent::default(),
            },
            vec![attempt(1, OutcomeClass::Success)],
            Some(Lifecycle::Accepted {
                operation: Operation {
                    id: "j-7".into(),
                    status_url: Some("https://search.example/jobs/j-7".into()),
                    generated: false,
                },
            }),
        ),
    ]
}

#[test]
fn committed_schema_is_current() {
    let generated = serde_json::to_string_pretty(&envelope_json_schema()).unwrap() + "\n";
    if std::env::var_os("CANDOR_BLESS").is_some() {
        std::fs::write(committed_path(), &generated).unwrap();
    }
    let committed = std::fs::read_to_string(committed_path()).unwrap_or_default();
    assert!(
        committed == generated,
        "spec/v1/envelope.v1.schema.json is stale; regenerate it with \
         `CANDOR_BLESS=1 cargo test -p candor-schema --test envelope_schema`"
    );
}

/// The example envelopes, one of each class and an accepted operation, as committed for the
/// validators of other languages: the Python suite checks every one against the committed
/// schema with its own validator, and that the schema refuses what the contract forbids
/// (`adapters/python/tests/test_envelope.py`).
#[test]
fn committed_examples_are_current() {
    let path = committed_path().with_file_name("envelope.v1.examples.json");
    let examples = examples();
    let mut classes: Vec<OutcomeClass> = examples.iter().map(Envelope::class).collect();
    classes.dedup();
    for class in OutcomeClass::ALL {
        assert!(classes.contains(class), "no example of {class}");
    }
    let generated = serde_json::to_string_pretty(&examples).unwrap() + "\n";
    if std::env::var_os("CANDOR_BLESS").is_some() {
        std::fs::write(&path, &generated).unwrap();
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "spec/v1/envelope.v1.examples.json is stale; regenerate it with \
         `CANDOR_BLESS=1 cargo test -p candor-schema --test envelope_schema`"
    );
}

#[test]
fn envelopes_round_trip_through_json() {
    for example in examples() {
        let json = serde_json::to_string(&example).unwrap();
        let back: Envelope<Value> = serde_json::from_str(&json).unwrap();
        assert_eq!(back, example);
    }
}

#[test]
fn reading_rejects_unknown_classes_and_forged_next_actions() {
    let good = serde_json::to_value(&examples()[3]).unwrap();

    let mut unknown = good.clone();
    unknown["outcome"]["class"] = json!("Access_Failure");
    let err = serde_json::from_value::<Envelope<Value>>(unknown).unwrap_err();
    assert!(err.to_string().contains("Access_Failure"), "{err}");

    let mut forged = good.clone();
    forged["next_actions"] = json!(["finish"]);
    let err = serde_json::from_value::<Envelope<Value>>(forged).unwrap_err();
    assert!(err.to_string().contains("next_actions"), "{err}");

    let mut future = good;
    future["schema_version"] = json!(2);
    let err = serde_json::from_value::<Envelope<Value>>(future).unwrap_err();
    assert!(err.to_string().contains("schema_version 2"), "{err}");
}

#[test]
fn summaries_speak_the_words_of_their_class() {
    let absence_words = [
        "no results",
        "nothing found",
        "not found",
        "empty",
        "0 results",
        "no matches",
        "none",
    ];
    for example in examples() {
        let summary = example.summary().to_lowercase();
        match example.class() {
            OutcomeClass::AccessFailure => {
                for word in absence_words {
                    assert!(!summary.contains(word), "{word:?} in {summary:?}");
                }
                assert!(summary.contains("failed"), "{summary}");
                assert!(summary.contains("unknown"), "{summary}");
            }
            OutcomeClass::Empty => assert!(summary.contains("nothing matches"), "{summary}"),
            OutcomeClass::Partial => {
                assert!(summary.contains("partial"), "{summary}");
                assert!(summary.contains("dropped 7 items"), "{summary}");
            }
            OutcomeClass::Success if example.lifecycle().is_some() => {
                assert!(summary.contains("has not completed"), "{summary}");
                assert!(!summary.contains("complete answer"), "{summary}");
            }
            OutcomeClass::Success => assert!(summary.contains("complete answer"), "{summary}"),
        }
    }
}

#[test]
fn legal_next_actions_follow_the_class() {
    let actions: Vec<Vec<NextAction>> = examples()
        .iter()
        .map(|e| e.next_actions().to_vec())
        .collect();
    assert_eq!(actions[0], [NextAction::Finish]);
    assert_eq!(actions[1], [NextAction::Finish]);
    assert_eq!(actions[2], [NextAction::Finish, NextAction::Escalate]);
    assert_eq!(actions[3], [NextAction::Retry, NextAction::Escalate]);
    assert_eq!(
        actions[4],
        [
            NextAction::Poll,
            NextAction::Compensate,
            NextAction::Escalate
        ]
    );
    assert!(
        !actions.iter().flatten().any(|a| *a == NextAction::Retry)
            || actions[3].contains(&NextAction::Retry)
    );
    // Empty never retries.
    assert!(!actions[1].contains(&NextAction::Retry));
}

#[test]
fn mcp_result_carries_the_envelope_and_flags_only_access_failure_as_error() {
    let committed: Value =
        serde_json::from_str(&std::fs::read_to_string(committed_path()).unwrap()).unwrap();
    assert_eq!(
        mcp::output_schema(),
        committed,
        "the declared outputSchema is the committed envelope schema, which the examples meet"
    );
    for example in examples() {
        let result = mcp::call_tool_result(&example).unwrap();
        assert_eq!(
            result["isError"],
            json!(example.class() == OutcomeClass::AccessFailure)
        );
        assert_eq!(
            result["structuredContent"],
            serde_json::to_value(&example).unwrap()
        );
        assert_eq!(result["content"][0]["type"], "text");
        assert_eq!(result["content"][0]["text"], example.summary());
        let echoed: Value =
            serde_json::from_str(result["content"][1]["text"].as_str().unwrap()).unwrap();
        assert_eq!(echoed, result["structuredContent"]);
    }
}

#[test]
fn outcome_tags_are_the_vocabulary_spellings() {
    for example in examples() {
        let json = serde_json::to_value(&example).unwrap();
        assert_eq!(json["outcome"]["class"], example.class().as_str());
    }
}
