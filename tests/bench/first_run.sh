#!/usr/bin/env bash
# The first run of one of the README's two commands as on a fresh machine: a fresh clone of
# REV, an empty HOME and CARGO_HOME (every crate downloaded again, no Tansu, no cargo-deny, no
# Python venv), an empty target directory, with the machine's Rust toolchains and Debian
# packages.
#
#   bash tests/bench/first_run.sh [REV] [up.sh arguments]   the stack (deploy/local/up.sh):
#       the seconds from the start until the dashboards answer /readyz on 3000, then the stack
#       is stopped
#   bash tests/bench/first_run.sh --tests [REV]             the tests (tests/run.sh): the
#       seconds until it ends, its exit status and the second each stage started
#
# REV defaults to HEAD. Both print each build's own time (cargo's "Finished" lines).
# Everything goes under CANDOR_FIRST_RUN_DIR (default /tmp/candor-first-run), emptied first;
# the ports of the stack must be free.
set -uo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
measured="stack"
if [[ "${1:-}" == "--tests" ]]; then
    measured="tests"
    shift
fi
rev="${1:-HEAD}"
shift || true
base="${CANDOR_FIRST_RUN_DIR:-/tmp/candor-first-run}"
rm -rf "$base/home" "$base/bin" "$base/clone" "$base/target" "$base/data"
mkdir -p "$base/home" "$base/bin"
# The toolchain's proxies only (cargo fmt and cargo clippy among them), so that nothing else
# under ~/.cargo/bin (Tansu, cargo-deny) is found.
for tool in cargo cargo-clippy cargo-fmt clippy-driver rustc rustdoc rustfmt rustup; do
    ln -s "$(command -v "$tool")" "$base/bin/$tool"
done
commit="$(git -C "$repo" rev-parse "$rev")"
git clone -q "$repo" "$base/clone" && git -C "$base/clone" checkout -q "$commit"
if [[ "$measured" == "tests" ]]; then
    # CI=true as .ci/run is run: plain-text logs.
    run=(CI=true bash tests/run.sh)
    log="$base/tests.log"
    tansu_log="$base/target/tansu-install.log"
else
    run=(bash deploy/local/up.sh --data-dir "$base/data" "$@")
    log="$base/up.log"
    tansu_log="$base/data/tansu-install.log"
fi
start=$(date +%s)
(
    cd "$base/clone" &&
    exec env -i HOME="$base/home" RUSTUP_HOME="${RUSTUP_HOME:-$HOME/.rustup}" CARGO_HOME="$base/home/.cargo" \
        CARGO_TARGET_DIR="$base/target" PATH="$base/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
        TERM=dumb LANG=C.UTF-8 SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt CARGO_HTTP_CAINFO=/etc/ssl/certs/ca-certificates.crt \
        "${run[@]}" >"$log" 2>&1
) &
job=$!
if [[ "$measured" == "tests" ]]; then
    wait "$job"
    status=$?
    echo "tests/run.sh ended with status $status after $(( $(date +%s) - start )) s"
    grep -h "^==> \[" "$log"
else
    while kill -0 "$job" 2>/dev/null; do
        if curl -sf 127.0.0.1:3000/readyz >/dev/null 2>&1; then
            echo "page on 3000 after $(( $(date +%s) - start )) s"
            break
        fi
        sleep 5
    done
    # A background job ignores SIGINT here; TERM stops the stack as Ctrl-C would.
    kill -TERM "$job" 2>/dev/null
    wait "$job" 2>/dev/null
fi
echo "commit $commit"
grep -h "Finished" "$log" "$tansu_log" 2>/dev/null
