# shellcheck shell=bash
# What sluice's tests need on the machine, and installing it on Debian/Ubuntu:
# sourced by ./test (the README's test command) and .ci/run, so the two can
# never disagree. As root, what is missing is installed with apt-get; as
# anyone else, the script stops with one line naming the packages to install.
# Nothing is ever skipped: a prerequisite that cannot be had is a failure.

# The packages of what is missing, one "package" per line.
missing_packages() {
  if ! command -v cargo >/dev/null 2>&1; then
    echo "rust (a Rust toolchain 1.88 or newer, from rustup.rs; not an apt package)"
  fi
  # rustc links with the system's C toolchain, and ring, zstd and SQLite
  # build C code; strip and objdump (binutils) pack the wheel and the .deb.
  # gcc alone (without its recommends) cannot link: the C library's start
  # files and headers are libc6-dev.
  if ! command -v cc >/dev/null 2>&1 || ! command -v strip >/dev/null 2>&1; then
    echo gcc
    echo libc6-dev
  elif [[ ! -e $(cc -print-file-name=Scrt1.o 2>/dev/null) ]]; then
    echo libc6-dev
  fi
  command -v git >/dev/null 2>&1 || echo git
  local initdb=
  command -v initdb >/dev/null 2>&1 && initdb=yes
  compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null 2>&1 && initdb=yes
  if [[ -z $initdb ]] || ! command -v psql >/dev/null 2>&1; then
    echo postgresql
  fi
  if ! { command -v mariadbd >/dev/null 2>&1 || [[ -x /usr/sbin/mariadbd ]]; } ||
    ! command -v mariadb-install-db >/dev/null 2>&1; then
    echo mariadb-server
  fi
  command -v mariadb >/dev/null 2>&1 || echo mariadb-client
  # The Arrow, Parquet and Python tests run pyarrow, DuckDB, pandas… in
  # virtualenvs they make with `python3 -m venv` (ensurepip).
  python3 -c "import ensurepip, venv" >/dev/null 2>&1 || echo python3-venv
  # The proxy's client tests run a JDBC application: javac, java and pgjdbc.
  command -v javac >/dev/null 2>&1 || echo default-jdk-headless
  [[ -e /usr/share/java/postgresql.jar ]] || echo libpostgresql-jdbc-java
  # A gateway test reads a cut response with curl, as users would.
  command -v curl >/dev/null 2>&1 || echo curl
  # The descriptor-exhaustion test and packaging checks.
  command -v prlimit >/dev/null 2>&1 || echo util-linux
  command -v dpkg-deb >/dev/null 2>&1 || echo dpkg
}

# Installs what is missing (as root), or stops naming it.
install_prerequisites() {
  local label=$1 missing
  mapfile -t missing < <(missing_packages)
  [[ ${#missing[@]} -eq 0 ]] && return 0
  if [[ ${missing[0]} == rust* ]]; then
    echo "$label: no cargo on PATH: install a Rust toolchain (1.88 or newer) from https://rustup.rs" >&2
    exit 1
  fi
  if [[ $EUID -ne 0 ]] || ! command -v apt-get >/dev/null 2>&1; then
    echo "$label: missing packages; install them and run again: sudo apt-get install ${missing[*]}" >&2
    exit 1
  fi
  echo "$label: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q --no-install-recommends "${missing[@]}"
  mapfile -t missing < <(missing_packages)
  if [[ ${#missing[@]} -ne 0 ]]; then
    echo "$label: still missing after apt-get install: ${missing[*]}" >&2
    exit 1
  fi
}
