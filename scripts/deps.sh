# Sourced by scripts/run, scripts/test and .ci/run: install what building and testing need when it
# is missing, from Debian's packages (as root, or through sudo).
#   need_build: cmake and a C compiler (Pingora's zlib-ng is built with cmake);
#   need_tests: the above, redis-server (the shared-state tests) and Python's venv (the client suite).

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
  command -v cc >/dev/null 2>&1 || echo build-essential
}

need_build() {
  # shellcheck disable=SC2046
  install_missing $(build_missing)
}

need_tests() {
  local missing
  missing=$(build_missing)
  command -v redis-server >/dev/null 2>&1 || missing="$missing redis-server"
  command -v python3 >/dev/null 2>&1 || missing="$missing python3"
  python3 -c 'import ensurepip, venv' >/dev/null 2>&1 || missing="$missing python3-venv"
  # shellcheck disable=SC2086
  install_missing $missing
}
