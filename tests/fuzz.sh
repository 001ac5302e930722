#!/usr/bin/env bash
# Fuzzes the collector's input decoding with cargo-fuzz (libFuzzer, AddressSanitizer): every target
# in collector/fuzz/fuzz_targets/ (OTLP protobuf and JSON bodies, capped gzip, Kafka records), each
# for the given seconds over a copy of its committed corpus, so that a run never changes the clone.
# Logs, the inputs that crashed, timed out or ran out of memory, and report.md go to
# ~/.cache/candor-fuzz/<UTC time>/. Exits non-zero when any target found one.
#
# Usage: bash tests/fuzz.sh [seconds-per-target]   (default 30)
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
root="$PWD"

seconds="${1:-30}"
if ! [[ "$seconds" =~ ^[1-9][0-9]*$ ]]; then
    echo "usage: bash tests/fuzz.sh [seconds-per-target]  (whole seconds, default 30)" >&2
    exit 2
fi

# A login shell may not have put rustup's bin directory on PATH yet.
if ! command -v cargo >/dev/null && [[ -f "$HOME/.cargo/env" ]]; then
    # shellcheck source=/dev/null
    source "$HOME/.cargo/env"
fi

banner() {
    echo "==> [${SECONDS}s] $*"
}

if ! command -v cargo-fuzz >/dev/null; then
    banner "cargo install cargo-fuzz"
    cargo install cargo-fuzz --locked
fi

fuzz_dir="$root/collector/fuzz"
# Instrumented builds outlive the clone, in their own directory: their flags differ from the
# workspace's, so sharing $CARGO_TARGET_DIR would only make each rebuild the other.
target_dir="$HOME/.cache/candor-fuzz-target"
results="$HOME/.cache/candor-fuzz/$(date -u +%Y%m%dT%H%M%SZ)"
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
mkdir -p "$results"
host="$(rustc -vV | sed -n 's/^host: //p')"

targets=()
for file in "$fuzz_dir"/fuzz_targets/*.rs; do
    targets+=("$(basename "$file" .rs)")
done

# This machine's only toolchain may be stable: RUSTC_BOOTSTRAP=1 lets it take the -Z flags
# cargo-fuzz passes for the sanitizer. Only the fuzz build sees it. -a: debug assertions and
# overflow checks, so that arithmetic which overflows on some input is a crash.
for target in "${targets[@]}"; do
    banner "cargo fuzz build $target"
    RUSTC_BOOTSTRAP=1 cargo fuzz build --fuzz-dir "$fuzz_dir" --target-dir "$target_dir" \
        -a "$target"
done

# What cargo-fuzz sets when it runs a target itself; the binaries are run directly here.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_odr_violation=0"

report="$results/report.md"
header="| target | seconds | executions | exec/s | crashes | timeouts | ooms |"
{
    echo "# Fuzzing the collector's input decoding"
    echo
    commit="$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
    echo "$(date -u +%Y-%m-%dT%H:%M:%SZ), commit $commit, $seconds s per target," \
        "$(nproc) cores. Crashes include leaks (LeakSanitizer)."
    echo
    echo "$header"
    echo "|---|---:|---:|---:|---:|---:|---:|"
} >"$report"
banner "fuzzing ${#targets[@]} targets for ${seconds}s each (logs and artifacts: $results)"
echo "$header"

count() {
    find "$1" -maxdepth 1 -type f \( -name "$2" -o -name "${3:-$2}" \) | wc -l
}

problems=()
for target in "${targets[@]}"; do
    out="$results/$target"
    corpus="$scratch/$target"
    mkdir -p "$out" "$corpus"
    if [[ -d "$fuzz_dir/corpus/$target" ]]; then
        cp -R "$fuzz_dir/corpus/$target/." "$corpus/"
    else
        echo "note: $target has no committed corpus; it starts from nothing" >&2
    fi
    log="$out/libfuzzer.log"
    started=$SECONDS
    status=0
    "$target_dir/$host/release/$target" "$corpus" \
        -max_total_time="$seconds" -print_final_stats=1 -timeout=10 -rss_limit_mb=2048 \
        -artifact_prefix="$out/" >"$log" 2>&1 || status=$?
    elapsed=$((SECONDS - started))
    executions="$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)"
    executions="${executions:-0}"
    rate="$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n 1)"
    rate="${rate:-$((executions / (elapsed > 0 ? elapsed : 1)))}"
    crashes="$(count "$out" 'crash-*' 'leak-*')"
    timeouts="$(count "$out" 'timeout-*')"
    ooms="$(count "$out" 'oom-*')"
    row="| $target | $elapsed | $executions | $rate | $crashes | $timeouts | $ooms |"
    echo "$row"
    echo "$row" >>"$report"
    if ((crashes + timeouts + ooms > 0)); then
        while IFS= read -r artifact; do
            problems+=("$target: $artifact")
        done < <(find "$out" -maxdepth 1 -type f \
            \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' -o -name 'oom-*' \) | sort)
    elif ((status != 0)); then
        problems+=("$target: libFuzzer exited with status $status and no artifact; see $log")
    fi
done

if ((${#problems[@]} > 0)); then
    {
        echo
        echo "## Found"
        echo
        for problem in "${problems[@]}"; do
            echo "- $problem"
        done
        echo
        echo "Reproduce one: \`$target_dir/$host/release/<target> <artifact>\`; minimize it with"
        echo "\`RUSTC_BOOTSTRAP=1 cargo fuzz tmin --fuzz-dir collector/fuzz" \
            "--target-dir $target_dir <target> <artifact>\`."
    } >>"$report"
    echo "fuzzing found problems (report: $report):" >&2
    for problem in "${problems[@]}"; do
        echo "  $problem" >&2
    done
    echo "reproduce one with: $target_dir/$host/release/<target> <artifact>" >&2
    exit 1
fi

banner "no crash, timeout or out-of-memory; results in $results"
