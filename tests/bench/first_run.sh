#!/usr/bin/env bash
# The first run of deploy/local/up.sh as on a fresh machine: a fresh clone of REV, an empty
# CARGO_HOME (every crate downloaded again), an empty target directory and no Tansu, with the
# machine's Rust toolchain and Debian packages. Prints the seconds from the start until the
# dashboards' page answers on 3000, then stops the stack. Extra arguments go to up.sh.
#
#   bash tests/bench/first_run.sh [REV] [up.sh arguments]     (REV defaults to HEAD)
#
# Everything goes under CANDOR_FIRST_RUN_DIR (default /tmp/candor-first-run), emptied first;
# the ports of the stack must be free.
set -uo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
rev="${1:-HEAD}"
shift || true
base="${CANDOR_FIRST_RUN_DIR:-/tmp/candor-first-run}"
rm -rf "$base/home" "$base/bin" "$base/clone" "$base/target" "$base/data"
mkdir -p "$base/home" "$base/bin"
# The toolchain's proxies only, so that nothing else under ~/.cargo/bin (Tansu) is found.
for tool in cargo rustc rustdoc rustup rustfmt; do
    ln -s "$(command -v "$tool")" "$base/bin/$tool"
done
commit="$(git -C "$repo" rev-parse "$rev")"
git clone -q "$repo" "$base/clone" && git -C "$base/clone" checkout -q "$commit"
start=$(date +%s)
(
    cd "$base/clone" &&
    exec env -i HOME="$base/home" RUSTUP_HOME="${RUSTUP_HOME:-$HOME/.rustup}" CARGO_HOME="$base/home/.cargo" \
        CARGO_TARGET_DIR="$base/target" PATH="$base/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
        TERM=dumb LANG=C.UTF-8 SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt CARGO_HTTP_CAINFO=/etc/ssl/certs/ca-certificates.crt \
        bash deploy/local/up.sh --data-dir "$base/data" "$@" >"$base/up.log" 2>&1
) &
up=$!
while kill -0 "$up" 2>/dev/null; do
    if curl -sf 127.0.0.1:3000/ >/dev/null 2>&1; then
        echo "page on 3000 after $(( $(date +%s) - start )) s"
        break
    fi
    sleep 5
done
# A background job ignores SIGINT here; TERM stops the stack as Ctrl-C would.
kill -TERM "$up" 2>/dev/null
wait "$up" 2>/dev/null
echo "commit $commit"
grep -h "Finished" "$base/up.log" "$base/data/tansu-install.log" 2>/dev/null
