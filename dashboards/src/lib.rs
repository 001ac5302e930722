//! Candor's dashboards: the separate stack that watches the pipeline and the tools it reports
//! on, and that cannot go green during an outage.
//!
//! It has its own process, its own Kafka consumer group and read-only access to the tables, and
//! shares nothing with the collector. What it knows comes from these places:
//!
//! - [`history`]: at start, the tables give the model its history window, so that a restart
//!   loses nothing the compactor stored, also what the brokers no longer hold;
//! - [`stream`]: its own consumer of the pipeline's topics, from where the tables end, builds the
//!   [`model`] (calls per class from the adapters' counters, failure events, heartbeats,
//!   adapter instances, and the asynchronous [`operations`] with their states);
//! - [`watch`]: the Delta logs give the tables' committed watermark and the compactor's lag;
//! - [`forensic`]: the forensic view reads the tables and the Kafka tail with `candor-query`;
//! - [`reconcile`], [`reconciler`]: on a schedule, the same reads check the adapters'
//!   `tool.outcomes` counter against the failure events stored, so that events lost between
//!   adapter and table show.
//!
//! [`health`] judges every hop LIVE, STALE or UNKNOWN, and every panel carries that state: a
//! panel whose sources are stale never shows a green zero. [`rules`] and [`alerts`] evaluate the
//! alert rules, and [`persist`] keeps the alert instances and the counters across restarts;
//! [`notify`] delivers them to webhooks through the adapter, and [`silences`] reads an
//! Alertmanager receiver's silences as acknowledgements. The alert loop ([`engine`]) publishes
//! an immutable [`snapshot`] of it all after each evaluation and every second between them;
//! [`web`] serves the pages ([`page`], built from the same [`view`] the JSON API returns) and
//! [`metrics`] the Prometheus text format from the newest snapshot alone; [`access`] decides who
//! may read them. [`config`] is the configuration file, validated before anything starts.
//!
//! The modules stand in layers, each importing only from its own layer or those below: the
//! leaves ([`keys`], [`health`], [`metric_names`], [`sync`]), the pure domain, the shared
//! [`state`], the [`snapshot`] taken of it, the sources and loops that write the state and
//! publish snapshots, and the presentation that reads the snapshots (ARCHITECTURE.md;
//! `tests/layers.rs` keeps it so).

pub mod access;
pub mod ack_link;
pub mod alerts;
pub mod config;
pub mod engine;
pub mod forensic;
pub mod health;
pub mod history;
pub mod instances;
pub mod keys;
pub mod metric_names;
pub mod metrics;
pub mod model;
pub mod notify;
pub mod operations;
pub mod page;
pub mod persist;
pub mod reconcile;
pub mod reconciler;
pub mod rules;
pub mod silences;
pub mod snapshot;
pub mod state;
pub mod stream;
pub mod sync;
pub mod view;
pub mod watch;
pub mod web;
