# Sourced by scripts/run, scripts/test and .ci/run: install what building and testing need when it
# is missing, from Debian's packages (as root, or through sudo).
#   need_build: cmake, make and C and C++ compilers (Pingora's zlib-ng and libopus are built with
#   cmake, LAME with its configure script and make, the FDK AAC encoder is C++);
#   need_mold: the mold linker, which .ci/run links with when it can be installed;
#   need_tests: the above, redis-server (the shared-state tests), PostgreSQL's server and client (the
#   usage-ledger tests) and Python's venv (the client suite);
#   need_prometheus: Prometheus (promtool checks and unit-tests the alerting rules; the dashboard
#   test runs the server), without the recommended node exporter;
#   need_chromium: Debian's Chromium, and Node.js with npm when either is missing (the console's
#   browser test, tests/console/run.sh, drives Chromium with playwright-core from the npm registry).

as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

install_missing() {
  if [ $# -gt 0 ]; then
    echo "installing: $*"
    as_root apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@"
  fi
}

build_missing() {
  command -v cmake >/dev/null 2>&1 || echo cmake
  # build-essential brings cc, c++ (g++) and make.
  if ! command -v cc >/dev/null 2>&1 || ! command -v c++ >/dev/null 2>&1 ||
    ! command -v make >/dev/null 2>&1; then
    echo build-essential
  fi
}

need_build() {
  # shellcheck disable=SC2046
  install_missing $(build_missing)
}

# mold, the faster linker CI links with (.ci/run); optional: without it the system linker is used.
need_mold() {
  command -v mold >/dev/null 2>&1 || install_missing mold || true
}

# The path of one of PostgreSQL's server programs: on PATH, else in Debian's versioned directory.
pg_bin() {
  command -v "$1" 2>/dev/null && return 0
  local found
  found=$(ls -d /usr/lib/postgresql/*/bin/"$1" 2>/dev/null | sort -V | tail -1)
  [ -n "$found" ] && echo "$found"
}

need_tests() {
  local missing
  missing=$(build_missing)
  command -v redis-server >/dev/null 2>&1 || missing="$missing redis-server"
  # The ledger tests use the server (a running one, and initdb/pg_ctl for a private one they
  # stop and restart) and psql (scripts/test checks the server with it).
  if ! command -v psql >/dev/null 2>&1 || ! pg_bin initdb >/dev/null; then
    missing="$missing postgresql"
  fi
  command -v python3 >/dev/null 2>&1 || missing="$missing python3"
  python3 -c 'import ensurepip, venv' >/dev/null 2>&1 || missing="$missing python3-venv"
  # shellcheck disable=SC2086
  install_missing $missing
}

need_prometheus() {
  if ! command -v promtool >/dev/null 2>&1 || ! command -v prometheus >/dev/null 2>&1; then
    echo "installing: prometheus"
    as_root apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus
  fi
}

# Debian's Chromium, which the console's browser test (tests/console) drives with playwright-core:
# no browser is downloaded at test time.
need_chromium() {
  local missing=
  [ -x /usr/bin/chromium ] || missing=chromium
  command -v node >/dev/null 2>&1 || missing="$missing nodejs"
  command -v npm >/dev/null 2>&1 || missing="$missing npm"
  # shellcheck disable=SC2086
  install_missing $missing
}
