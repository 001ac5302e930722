//! Writes the seed corpora of the fuzz targets: a few valid and interesting inputs per target, as
//! `corpus/<target>/seed-NN-<what>`, the same bytes on every run. Each seed is run through its
//! target's checks before it is written, so a seed that breaks an invariant stops the run.
//!
//! ```text
//! cargo run --manifest-path collector/fuzz/Cargo.toml --bin seeds [DIR]
//! ```
//!
//! DIR defaults to `collector/fuzz/corpus`. Earlier `seed-*` files there are replaced; other files
//! (inputs a fuzzing run found and someone committed) are left alone.

mod corpora;
mod metric_requests;
mod otlp;
mod trace_requests;

use std::error::Error;
use std::path::{Path, PathBuf};

use crate::corpora::{gzip_capped, kafka_record, otlp_json, otlp_metrics, otlp_traces};

type Result<T> = std::result::Result<T, Box<dyn Error>>;

const TRACE_ID: [u8; 16] = [
    0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36,
];
const EVENT_TIME: u64 = 1_799_999_999_000_000_000;
/// The tool name of the seeds whose bytes are patched: it appears nowhere else in them.
const PATCHED_TOOL: &str = "lookup";

fn main() -> Result<()> {
    let root = match std::env::args_os().nth(1) {
        Some(dir) => PathBuf::from(dir),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus"),
    };
    let mut written = 0;
    written += otlp_traces(&root)?;
    written += otlp_metrics(&root)?;
    written += otlp_json(&root)?;
    written += gzip_capped(&root)?;
    written += kafka_record(&root)?;
    println!("wrote {written} seeds under {}", root.display());
    Ok(())
}

/// One target's corpus directory.
struct Corpus {
    dir: PathBuf,
    check: fn(&[u8]),
    written: usize,
}

impl Corpus {
    /// The directory of `target`, emptied of earlier seeds.
    fn open(root: &Path, target: &str, check: fn(&[u8])) -> Result<Self> {
        let dir = root.join(target);
        std::fs::create_dir_all(&dir)?;
        for entry in std::fs::read_dir(&dir)? {
            let entry = entry?;
            if entry.file_name().to_string_lossy().starts_with("seed-") {
                std::fs::remove_file(entry.path())?;
            }
        }
        Ok(Self {
            dir,
            check,
            written: 0,
        })
    }

    /// Checks a seed as its target would, then writes it as `seed-NN-<name>`.
    fn add(&mut self, name: &str, bytes: &[u8]) -> Result<()> {
        (self.check)(bytes);
        self.written += 1;
        let path = self.dir.join(format!("seed-{:02}-{name}", self.written));
        std::fs::write(&path, bytes)?;
        Ok(())
    }
}
