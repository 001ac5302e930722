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

# install_debian_packages, start_tansu_install, ensure_python_venv: shared with the stack and the
# benchmarks, each installing only what is missing.
# shellcheck source=deploy/local/install.sh
source deploy/local/install.sh

# Rust tools the stages below call. Each is installed only when absent, so reruns cost nothing.
ensure_tools() {
    if ! command -v cargo-nextest >/dev/null; then
        banner "cargo install cargo-nextest"
        cargo install cargo-nextest --locked
    fi
    if ! command -v cargo-deny >/dev/null; then
        banner "cargo install cargo-deny"
        cargo install cargo-deny --locked --no-default-features
    fi
    local component
    for component in rustfmt clippy; do
        if ! rustup component list --installed | grep -Eq "^${component}(-|$)"; then
            banner "rustup component add ${component}"
            rustup component add "${component}"
        fi
    done
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
# run their own Prometheus, and the server that scrapes the dashboards across their restart.
# prometheus-alertmanager: a real Alertmanager receiver, whose silences acknowledge alerts.
# chromium, chromium-driver: the dashboards' browser tests (WebDriver through Selenium).
# kubectl: renders the Kubernetes manifests (kustomize) for the deployment files' checks.
# socat terminates TLS in front of Tansu in the Kafka security test.
install_debian_packages "${CANDOR_BUILD_PACKAGES[@]}" openssl socat curl prometheus prometheus-alertmanager chromium chromium-driver libnss3-tools kubectl
ensure_tools
# Tansu (once per machine) builds beside the checks and builds below; the end-to-end suite waits
# for it. Leaving early stops it.
mkdir -p "$CARGO_TARGET_DIR"
start_tansu_install "$CARGO_TARGET_DIR/tansu-install.log"
trap stop_tansu_install EXIT
ensure_python_venv
# The end-to-end harness runs this Python (CANDOR_PYTHON), wherever CANDOR_VENV put the venv.
export CANDOR_PYTHON="${CANDOR_PYTHON:-$CANDOR_VENV/bin/python}"

# The Vercel AI SDK emitter of the end-to-end suite (Node, from the machine's image), from its
# lock file; npm's own cache keeps a second clone's install off the network.
banner "npm ci (tests/e2e/clients/vercel_ai)"
command -v node >/dev/null || { echo "node is missing: the Vercel AI SDK emitter needs Node.js 20 or later" >&2; exit 1; }
(cd tests/e2e/clients/vercel_ai && npm ci --no-audit --no-fund --loglevel=error)

banner "promtool check rules + test rules (dashboards/prometheus)"
promtool check rules dashboards/prometheus/candor.rules.yml
promtool test rules dashboards/prometheus/candor.rules.test.yml

# The Python adapter, installed from this checkout by ensure_python_venv: its tests (the spec's
# vectors among them), strict typing and lints, with the settings in its pyproject.toml.
banner "python adapter: pytest, mypy --strict, ruff"
(
    cd adapters/python
    "$CANDOR_VENV/bin/python" -m pytest -q -p no:cacheprovider
    "$CANDOR_VENV/bin/mypy" --cache-dir "$HOME/.cache/candor-mypy"
    "$CANDOR_VENV/bin/ruff" check --no-cache .
    "$CANDOR_VENV/bin/ruff" format --no-cache --check .
)

# The TypeScript adapter, from its lock file: strict type-checking, lints, and its tests (the
# spec's vectors among them) with Node's own test runner.
banner "typescript adapter: npm ci, tsc --noEmit, eslint, node --test"
(
    cd adapters/typescript
    npm ci --no-audit --no-fund --loglevel=error
    npm run --silent typecheck
    npm run --silent lint
    npm test
    # dist/: what the end-to-end suite's Node service imports.
    npm run --silent build
)
# The end-to-end suite's Node service that calls through the TypeScript adapter, from its lock
# file (the adapter as a local package, built above).
(cd tests/e2e/clients/ts_adapter && npm ci --no-audit --no-fund --loglevel=error)

# The rest of our Python (the end-to-end clients, the benchmark reports, the manifest generator):
# strict typing and lints, with the settings in mypy.ini and ruff.toml.
banner "python scripts: mypy --strict, ruff"
"$CANDOR_VENV/bin/mypy" --config-file mypy.ini --cache-dir "$HOME/.cache/candor-mypy"
"$CANDOR_VENV/bin/ruff" check --no-cache tests deploy
"$CANDOR_VENV/bin/ruff" format --no-cache --check tests deploy

banner "cargo fmt --check"
cargo fmt --all -- --check
# The fuzz crate is a workspace of its own (its builds are instrumented), outside --all.
cargo fmt --manifest-path collector/fuzz/Cargo.toml -- --check

# Libraries must build without their optional features: a host takes only what it needs.
banner "cargo check (adapter without optional features)"
cargo check -p candor-adapter --lib --locked
# The collector's input decoding builds without the service (what the fuzz targets build).
cargo check -p candor-collector --lib --no-default-features --locked

# Dependencies: licenses allowed by deny.toml, no git or unknown registry, duplicate versions
# listed. (Advisories need a database this machine cannot fetch; see deny.toml.)
banner "cargo deny (licenses, bans, sources)"
cargo deny --locked check licenses bans sources

banner "cargo clippy"
cargo clippy --workspace --all-targets --all-features --locked -- -D warnings

# Public items are documented (missing_docs) and their documentation builds without a warning:
# a broken intra-doc link fails here.
banner "cargo doc (rustdoc warnings are errors)"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --all-features --locked

# The end-to-end suite starts the binaries as real processes; a test build does not make them.
banner "cargo build (binaries the end-to-end suite runs)"
cargo build --workspace --bins --all-features --locked

wait_for_tansu
# --no-fail-fast: one run reports every failing test, not just the first.
banner "cargo nextest run"
cargo nextest run --profile ci --workspace --all-features --locked --no-fail-fast

# nextest does not run doc tests; the crate-root examples are part of the contract.
banner "cargo test --doc"
cargo test --workspace --all-features --locked --doc

# A short run of every fuzz target over its committed corpus (the long runs: tests/fuzz.sh 600).
banner "fuzz targets, 10 s each"
bash tests/fuzz.sh 10

banner "all stages passed"
