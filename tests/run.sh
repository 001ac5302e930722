#!/usr/bin/env bash
# The project's single test command: formatting, lints, the test suites and the doc tests.
# Runs on a fresh Debian machine as root, in a fresh clone; installs only what is missing.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

# Builds outlive the clone: a fresh clone reuses the compiled dependencies of the last run.
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/candor-target}"
export RUST_BACKTRACE=1
# CI logs are read as plain text; colour codes only get in the way there.
if [[ "${CI:-}" == "true" ]]; then
    export CARGO_TERM_COLOR=never
fi
# A login shell may not have put rustup's bin directory on PATH yet.
if ! command -v cargo >/dev/null && [[ -f "$HOME/.cargo/env" ]]; then
    # shellcheck source=/dev/null
    source "$HOME/.cargo/env"
fi

banner() {
    echo "==> [${SECONDS}s] $*"
}

# System packages the tests need, installed only when missing (apt-get update runs only then).
install_debian_packages() {
    local missing=() package
    for package in "$@"; do
        dpkg -s "$package" >/dev/null 2>&1 || missing+=("$package")
    done
    if ((${#missing[@]} == 0)); then
        return 0
    fi
    banner "apt-get install ${missing[*]}"
    apt-get update
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
}

# Rust tools the stages below call. Each is installed only when absent, so reruns cost nothing.
ensure_tools() {
    if ! command -v cargo-nextest >/dev/null; then
        banner "cargo install cargo-nextest"
        cargo install cargo-nextest --locked
    fi
    local component
    for component in rustfmt clippy; do
        if ! rustup component list --installed | grep -Eq "^${component}(-|$)"; then
            banner "rustup component add ${component}"
            rustup component add "${component}"
        fi
    done
}

# The Kafka API broker the end-to-end suites start (the release build takes ~15 minutes once
# per machine; later runs find it installed).
ensure_tansu() {
    if command -v tansu >/dev/null || [[ -x "$HOME/.cargo/bin/tansu" ]]; then
        return 0
    fi
    banner "cargo install tansu"
    cargo install tansu --locked --features dynostore,libsql
}

# The official OpenTelemetry Python SDK, a foreign OTLP client for the end-to-end suite, in a
# venv outside the clone; reinstalled only when the pinned requirements change.
ensure_python_clients() {
    local venv="$HOME/.cache/candor-venv" requirements=tests/e2e/clients/requirements.txt
    if cmp -s "$requirements" "$venv/requirements.txt"; then
        return 0
    fi
    banner "python venv with $requirements"
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$requirements"
    cp "$requirements" "$venv/requirements.txt"
}

# Each fresh clone builds the workspace's own crates anew beside the old ones (their hashes
# include the clone's path); without pruning, the shared target directory grows by several GiB
# per run. Dependencies are kept: they are what makes a fresh clone's build incremental.
prune_target() {
    local debug="$CARGO_TARGET_DIR/debug"
    [[ -d "$debug" ]] || return 0
    find "$debug/incremental" -mindepth 1 -maxdepth 1 -mmin +30 -exec rm -rf {} + 2>/dev/null || true
    find "$debug/deps" -maxdepth 1 -mmin +30 \
        \( -name 'candor*' -o -name 'libcandor*' -o -name 'e2e-*' -o -name '*.o' \) \
        -delete 2>/dev/null || true
    # Test and bench executables (every executable in deps is the workspace's own; a
    # dependency leaves libraries there) and examples, up to 1 GiB each.
    find "$debug/deps" -maxdepth 1 -type f -perm -u+x ! -name '*.so' -mmin +30 \
        -delete 2>/dev/null || true
    find "$debug/examples" -maxdepth 1 -type f -mmin +30 -delete 2>/dev/null || true
}

prune_target
# openssl, curl: the TLS end-to-end test makes a certificate and calls HTTPS.
# prometheus: promtool, which checks and unit-tests the Prometheus rules shipped for teams that
# run their own Prometheus.
# chromium, chromium-driver: the dashboards' browser tests (WebDriver through Selenium).
# kubectl: renders the Kubernetes manifests (kustomize) for the deployment files' checks.
# libssl-dev and pkg-config build librdkafka with TLS; socat terminates TLS in front of Tansu in
# the Kafka security test.
install_debian_packages libssl-dev pkg-config openssl socat curl prometheus chromium chromium-driver kubectl
ensure_tools
ensure_tansu
ensure_python_clients

banner "promtool check rules + test rules (dashboards/prometheus)"
promtool check rules dashboards/prometheus/candor.rules.yml
promtool test rules dashboards/prometheus/candor.rules.test.yml

banner "cargo fmt --check"
cargo fmt --all -- --check
# The fuzz crate is a workspace of its own (its builds are instrumented), outside --all.
cargo fmt --manifest-path collector/fuzz/Cargo.toml -- --check

# Libraries must build without their optional features: a host takes only what it needs.
banner "cargo check (adapter without optional features)"
cargo check -p candor-adapter --lib --locked
# The collector's input decoding builds without the service (what the fuzz targets build).
cargo check -p candor-collector --lib --no-default-features --locked

banner "cargo clippy"
cargo clippy --workspace --all-targets --all-features --locked -- -D warnings

# The end-to-end suite starts the binaries as real processes; a test build does not make them.
banner "cargo build (binaries the end-to-end suite runs)"
cargo build --workspace --bins --all-features --locked

# --no-fail-fast: one run reports every failing test, not just the first.
banner "cargo nextest run"
cargo nextest run --workspace --all-features --locked --no-fail-fast

# nextest does not run doc tests; the crate-root examples are part of the contract.
banner "cargo test --doc"
cargo test --workspace --all-features --locked --doc

# A short run of every fuzz target over its committed corpus (the long runs: tests/fuzz.sh 600).
banner "fuzz targets, 10 s each"
bash tests/fuzz.sh 10

banner "all stages passed"
