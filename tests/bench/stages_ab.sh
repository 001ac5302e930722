#!/usr/bin/env bash
# The collector's and the compactor's own stages (`cargo bench -p candor-e2e --bench ingest` and
# `--bench rows`) of an earlier commit beside this checkout's, in one run: both builds' bench
# binaries are built first, then run in turns, ROUNDS times, so that the machine's drift during
# the run falls on both alike. Prints each stage's criterion estimate per build and round.
#
#   bash tests/bench/stages_ab.sh BASE_REV [ROUNDS]
#
# BASE_REV is checked out into a temporary clone; both builds share CARGO_TARGET_DIR, so only the
# workspace's own crates are built twice. Criterion's reports go to the target directory as usual.
set -euo pipefail

base_rev=${1:?usage: stages_ab.sh BASE_REV [ROUNDS]}
rounds=${2:-2}
here=$(cd "$(dirname "$0")/../.." && pwd)
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/candor-target}"
if ! command -v cargo >/dev/null && [[ -f "$HOME/.cargo/env" ]]; then
    # shellcheck source=/dev/null
    source "$HOME/.cargo/env"
fi
banner() { printf '\n== %s\n' "$*"; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
git -C "$here" worktree add --detach "$work/base" "$base_rev" >/dev/null
trap 'git -C "$here" worktree remove --force "$work/base"; rm -rf "$work"' EXIT

# Builds the two bench binaries of the checkout at $1 and copies them to $2. Every source file
# is touched first: both checkouts name their crates alike in the shared target directory, so an
# artifact of the other checkout must never look fresh to this one.
build() {
    local checkout=$1 out=$2
    mkdir -p "$out"
    (cd "$checkout" && git ls-files '*.rs' | xargs touch)
    (cd "$checkout" && cargo bench -p candor-e2e --bench ingest --bench rows --no-run --locked \
        --message-format json 2>/dev/null) |
        python3 -c '
import json, shutil, sys
for line in sys.stdin:
    message = json.loads(line)
    if message.get("reason") == "compiler-artifact" and message.get("executable") \
            and message["target"]["name"] in ("ingest", "rows"):
        shutil.copy(message["executable"], sys.argv[1] + "/" + message["target"]["name"])
' "$out"
    [[ -x $out/ingest && -x $out/rows ]] || { echo "building $checkout failed" >&2; exit 1; }
}

banner "building $base_rev"
build "$work/base" "$work/bin-base"
banner "building this checkout"
build "$here" "$work/bin-this"

cd "$here/tests"
for round in $(seq 1 "$rounds"); do
    for bench in ingest rows; do
        for build in base this; do
            echo "=== round $round, $bench, $build"
            "$work/bin-$build/$bench" --bench --noplot 2>&1 |
                awk '/^[a-z]/ && !/time:/ { name = $0 } /time:/ { sub(/^ +/, ""); print (/^time/ ? name "  " : "") $0 }' |
                grep -v '%'
        done
    done
done
