//! Generates the Rust types of `proto/` when the `proto` feature is on, with the pure-Rust
//! compiler `protox` (no `protoc` needed).

fn main() {
    #[cfg(feature = "proto")]
    proto::generate();
}

#[cfg(feature = "proto")]
mod proto {
    pub fn generate() {
        let files = ["proto/candor/v1/records.proto"];
        for file in files {
            println!("cargo:rerun-if-changed={file}");
        }
        let descriptors = match protox::compile(files, ["proto"]) {
            Ok(descriptors) => descriptors,
            Err(err) => panic!("compiling {files:?}: {err}"),
        };
        if let Err(err) = prost_build::Config::new().compile_fds(descriptors) {
            panic!("generating Rust for {files:?}: {err}");
        }
    }
}
