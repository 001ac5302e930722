# What a machine needs to build, run and test Candor, installed only when missing. Sourced (not
# run) by the three entry points, which each ask for what they use:
#   deploy/local/up.sh     the stack:       install_debian_packages (build), start_tansu_install
#   tests/run.sh           the tests:       all of them (Tansu through start_tansu_install)
#   tests/bench/lib.sh     the benchmarks:  the stack's, plus ensure_python_venv
# Every step is idempotent: a second run on the same machine installs nothing but the Python
# adapter, from the checkout it runs in.

candor_install_banner() {
    if declare -F banner >/dev/null; then
        banner "$@"
    else
        echo "==> $*"
    fi
}

# Debian packages, installed in one apt-get run (and `apt-get update` only then). Not as root,
# through sudo.
install_debian_packages() {
    local missing=() package
    for package in "$@"; do
        dpkg -s "$package" >/dev/null 2>&1 || missing+=("$package")
    done
    ((${#missing[@]} > 0)) || return 0
    local sudo=()
    [[ "$(id -u)" == 0 ]] || sudo=(sudo)
    candor_install_banner "apt-get install ${missing[*]}"
    "${sudo[@]}" apt-get update
    DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y --no-install-recommends "${missing[@]}"
}

# What building Candor needs beyond a Rust toolchain: librdkafka links OpenSSL (TLS and SASL to
# a real cluster), found through pkg-config.
CANDOR_BUILD_PACKAGES=(libssl-dev pkg-config)

# The Kafka API broker of the local stack, the tests and the benchmarks (a release build of
# about 15 minutes, once per machine). `tansu` is its path afterwards.
ensure_tansu() {
    if ! command -v tansu >/dev/null && [[ ! -x "$HOME/.cargo/bin/tansu" ]]; then
        candor_install_banner "cargo install tansu (a release build of about 15 minutes, once per machine)"
        cargo install tansu --locked --features dynostore,libsql
    fi
    tansu="$(command -v tansu || echo "$HOME/.cargo/bin/tansu")"
}

# ensure_tansu in the background, beside another build: each of the two leaves a core idle at
# times (linking, a crate nothing else waits for), so on a fresh machine they finish sooner
# together than one after the other. The install's output goes to the file $1;
# wait_for_tansu waits for it and sets `tansu`.
start_tansu_install() {
    tansu_install=""
    tansu_install_log="$1"
    if ! command -v tansu >/dev/null && [[ ! -x "$HOME/.cargo/bin/tansu" ]]; then
        candor_install_banner "cargo install tansu in the background (once per machine; log: $tansu_install_log)"
        cargo install tansu --locked --features dynostore,libsql >"$tansu_install_log" 2>&1 &
        tansu_install=$!
    fi
}
wait_for_tansu() {
    if [[ -n "${tansu_install:-}" ]]; then
        local pid="$tansu_install"
        tansu_install=""
        if ! wait "$pid"; then
            echo "installing Tansu failed; see $tansu_install_log" >&2
            return 1
        fi
    fi
    ensure_tansu
}

# Stops an install start_tansu_install began and nobody waited for (a caller leaving early).
stop_tansu_install() {
    [[ -z "${tansu_install:-}" ]] || kill "$tansu_install" 2>/dev/null || true
}

# The Python environment of the end-to-end suite, the benchmarks and the Python adapter's checks
# (the OpenTelemetry SDK as a foreign client, deltalake, pyarrow and DuckDB as independent
# readers, Selenium, the deployment checks, the adapter's test and lint tools), in a venv outside
# the clone; made again only when the pinned requirements change. The adapter itself is installed
# from this checkout every time, as `pip install ./adapters/python` installs it for a user.
CANDOR_VENV="${CANDOR_VENV:-$HOME/.cache/candor-venv}"
ensure_python_venv() {
    local requirements=(tests/e2e/clients/requirements.txt adapters/python/requirements-dev.txt)
    if ! cat "${requirements[@]}" | cmp -s - "$CANDOR_VENV/requirements.txt"; then
        candor_install_banner "python venv with ${requirements[*]}"
        python3 -m venv "$CANDOR_VENV"
        "$CANDOR_VENV/bin/pip" install --quiet --disable-pip-version-check \
            -r "${requirements[0]}" -r "${requirements[1]}"
        cat "${requirements[@]}" >"$CANDOR_VENV/requirements.txt"
    fi
    "$CANDOR_VENV/bin/pip" install --quiet --disable-pip-version-check --no-deps \
        --no-build-isolation ./adapters/python
}
