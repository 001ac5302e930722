//! `candor-collector`: the pipeline's OTLP ingest service and its Kafka → Delta compactor.
//!
//! ```text
//! candor-collector ingest [--config FILE] [--grpc-addr A] [--http-addr A] [--metrics-addr A]
//!                         [--kafka B] [--heartbeat-interval D] [--collector-id ID]
//!                         [--log-format text|json] [--check]
//! candor-collector compact [--config FILE] [--table-root DIR|URL] [--kafka B]
//!                          [--metrics-addr A] [--group-id G] [--max-age D] [--compactor-id ID]
//!                          [--log-format text|json] [--check]
//! candor-collector maintain [--config FILE] [--table-root DIR|URL] [--optimize] [--vacuum]
//!                           [--retention] [--check]
//! candor-collector read --topic T [--kafka B] [--limit N] [--idle D] [--config FILE]
//!
//! --check validates the configuration as a start would, prints it and exits (0 valid, 2 not).
//! ```
//!
//! Each role is a module of this binary (`role/`) with the same anatomy: its arguments, then
//! parse → validate → build → run.

use anyhow::bail;
use clap::{Parser, Subcommand};

mod role;

use role::compact::CompactArgs;
use role::ingest::IngestArgs;
use role::maintain::MaintainArgs;
use role::read::ReadArgs;

/// The process's allocator (docs/adr/0007-allocators.md). C libraries (librdkafka among them)
/// allocate with glibc's malloc still, which is why the compact role keeps one arena of it.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(
    name = "candor-collector",
    version,
    about = "Candor's OTLP ingest service, its Kafka → Delta Lake compactor and their tools"
)]
struct Cli {
    #[command(subcommand)]
    role: Role,
}

#[derive(Subcommand)]
enum Role {
    /// Receive OTLP, validate, produce typed records to Kafka.
    Ingest(IngestArgs),
    /// Consume the topics into Delta Lake tables, exactly once.
    Compact(CompactArgs),
    /// Run table maintenance once: optimize, vacuum, retention (all three when none is named).
    Maintain(MaintainArgs),
    /// Print the records of one of the pipeline's topics as JSON lines, from the beginning.
    Read(ReadArgs),
}

fn main() -> anyhow::Result<()> {
    // The OTLP listeners use ring; the Delta Lake client brings aws-lc-rs as well, and rustls
    // refuses to pick between two providers on its own.
    if rustls::crypto::ring::default_provider()
        .install_default()
        .is_err()
    {
        bail!("a TLS crypto provider was installed before main");
    }
    match Cli::parse().role {
        Role::Ingest(args) => role::ingest::main(&args),
        Role::Compact(args) => role::compact::main(&args),
        Role::Maintain(args) => role::maintain::main(&args),
        Role::Read(args) => role::read::main(&args),
    }
}
