# Shared by the benchmark scripts: the release build, the work directory and process cleanup,
# and small helpers. Source it from the repository root after `set -euo pipefail`.

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/candor-target}"
bin="$CARGO_TARGET_DIR/release"
# What the benchmarks run beside Candor, installed when missing: the build's system packages,
# Tansu, and the Python environment of the independent readers (pyarrow, DuckDB, deltalake).
# shellcheck source=deploy/local/install.sh
source deploy/local/install.sh
install_debian_packages "${CANDOR_BUILD_PACKAGES[@]}"
ensure_tansu
if [[ -z "${CANDOR_PYTHON:-}" ]]; then
    ensure_python_venv
fi
python="${CANDOR_PYTHON:-$CANDOR_VENV/bin/python}"

# The DuckDB command-line tool, the fresh-process peer of `candor` (query.sh): PyPI's
# duckdb-cli ships its binary. Installed into the benchmarks' Python environment when missing;
# sets `duckdb_cli` to the binary.
ensure_duckdb_cli() {
    local find='import duckdb_cli, os; print(os.path.join(os.path.dirname(duckdb_cli.__file__), "duckdb"))'
    if ! duckdb_cli=$("$python" -c "$find" 2>/dev/null); then
        "$python" -m pip install --quiet --disable-pip-version-check duckdb-cli==1.5.6
        duckdb_cli=$("$python" -c "$find")
    fi
}

# Every binary in one release build, with the same package set as `deploy/local/up.sh --release`: cargo
# unifies features per build, and a different set would compile DataFusion again. Extra
# arguments (`--example NAME`) add to it. CANDOR_BENCH_BUILT=1 skips it: tests/bench/suite.sh
# builds once, then runs the scripts.
build_release() {
    [[ "${CANDOR_BENCH_BUILT:-}" != 1 ]] || return 0
    cargo build --release --locked -p candor-collector -p candor-e2e -p candor-query -p candor-cli \
        -p candor-dashboards --bin candor-collector --bin candor-loadgen --bin candor \
        --bin candor-dashboards "$@"
}

# The work directory (CANDOR_BENCH_DIR keeps it, and its data, between runs) and the processes
# started into `pids`, all ended on exit.
work="${CANDOR_BENCH_DIR:-$(mktemp -d)}"
pids=()
cleanup() {
    kill "${pids[@]}" 2>/dev/null || true
    wait 2>/dev/null || true
    [[ -n "${CANDOR_BENCH_DIR:-}" ]] || rm -rf "$work"
}
trap cleanup EXIT

# Launchers, run in the background by the caller (`tansu_memory "$port" "$log" &`, then `$!` is
# the process itself, since they exec).
tansu_memory() {
    exec "$tansu" broker --listener-url "tcp://127.0.0.1:$1" --advertised-listener-url "tcp://127.0.0.1:$1" \
        --storage-engine memory://tansu/ >"$2" 2>&1
}
# ingest KAFKA_PORT GRPC_PORT HTTP_PORT METRICS_PORT LOG
ingest() {
    local kafka=$1 grpc=$2 http=$3 metrics=$4 log=$5
    shift 5
    exec "$bin/candor-collector" ingest --grpc-addr "127.0.0.1:$grpc" --http-addr "127.0.0.1:$http" \
        --metrics-addr "127.0.0.1:$metrics" --kafka "127.0.0.1:$kafka" "$@" >"$log" 2>&1
}

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() { for _ in $(seq 200); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.05; done; echo "port $1 never opened" >&2; return 1; }
metric() { curl -sf "127.0.0.1:$1/metrics" | awk -v s="$2" '$1 == s { print $2 }'; }
cpu_seconds() { awk '{ printf "%.2f", ($14 + $15) / 100 }' "/proc/$1/stat"; }
