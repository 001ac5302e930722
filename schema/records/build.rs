//! Generates the Rust types of `proto/` with the pure-Rust compiler `protox` (no `protoc`
//! needed).

fn main() {
    let files = ["proto/candor/v1/records.proto"];
    for file in files {
        println!("cargo:rerun-if-changed={file}");
    }
    let descriptors = match protox::compile(files, ["proto"]) {
        Ok(descriptors) => descriptors,
        Err(err) => panic!("compiling {files:?}: {err}"),
    };
    let mut config = prost_build::Config::new();
    // Records print as JSON for people reading the topics (`candor-collector read`).
    config
        .type_attribute(".candor.v1", "#[derive(serde::Serialize)]")
        .field_attribute(
            ".candor.v1.Rejected.input",
            "#[serde(serialize_with = \"crate::proto::bytes_as_text\")]",
        );
    if let Err(err) = config.compile_fds(descriptors) {
        panic!("generating Rust for {files:?}: {err}");
    }
}
