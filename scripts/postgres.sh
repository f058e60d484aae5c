#!/usr/bin/env bash
# A throwaway PostgreSQL server on 127.0.0.1 for weft's PostgreSQL tests.
#
#   scripts/postgres.sh install   # the Debian package `postgresql` when absent
#   scripts/postgres.sh start     # initdb in a temporary directory, start, write the env file
#   scripts/postgres.sh restart   # stop (fast) and start again on the same data and port
#   scripts/postgres.sh stop      # stop it by PID (bounded wait) and delete its data
#   scripts/postgres.sh env       # print the env file path
#   scripts/postgres.sh pid       # print the postmaster's PID now (a restart changes it)
#
# `start` writes $WEFT_PG_ENV_FILE (default .tmp/postgres/env), to be sourced
# before `cargo test`:
#   WEFT_TEST_PG_URL      postgres://weft@127.0.0.1:PORT/weft
#   WEFT_TEST_PG_PID      the postmaster's PID
#   WEFT_TEST_PG_RESTART  this script's path (tests run `$it restart`)
#   WEFT_TEST_PG_CA       the PEM root that signed the server's certificate
#   WEFT_TEST_PG_OTHER_CA a PEM root that signed nothing here
#
# The server offers TLS (ssl = on) with a certificate made at start by a
# throwaway root, for the IP address 127.0.0.1 only (so `localhost` is a
# name it does not carry); clients that do not ask for TLS connect in the
# clear as before. WEFT_PG_TLS=0 starts it without TLS.
#
# The server listens on 127.0.0.1 only, on a port chosen free at start, with
# no Unix socket; trust authentication (nothing else can reach it). Its
# footprint is small (shared_buffers 32 MB, 200 connections) and it is
# durable like a production server: fsync and synchronous_commit stay on.
# PostgreSQL refuses to run as root, so as root the cluster is created and
# run as $WEFT_PG_OS_USER (default `nobody`) in a directory under /tmp that
# user owns.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SELF="$ROOT/scripts/postgres.sh"
STATE_DIR="${WEFT_PG_STATE_DIR:-$ROOT/.tmp/postgres}"
ENV_FILE="${WEFT_PG_ENV_FILE:-$STATE_DIR/env}"
CONF_FILE="$STATE_DIR/server.conf"
START_TIMEOUT_S="${WEFT_PG_START_TIMEOUT:-60}"
STOP_TIMEOUT_S="${WEFT_PG_STOP_TIMEOUT:-30}"

die() { echo "postgres.sh: $*" >&2; exit 1; }

bin_dir() {
  local d
  if command -v pg_config >/dev/null 2>&1; then
    d="$(pg_config --bindir 2>/dev/null || true)"
    if [[ -x "$d/initdb" && -x "$d/postgres" ]]; then echo "$d"; return; fi
  fi
  for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
    if [[ -x "$d/initdb" && -x "$d/postgres" ]]; then echo "$d"; return; fi
  done
  for d in /usr/local/bin /usr/bin; do
    if [[ -x "$d/initdb" && -x "$d/postgres" && -x "$d/pg_ctl" ]]; then echo "$d"; return; fi
  done
  return 1
}

cmd_install() {
  if bin_dir >/dev/null; then
    echo "postgresql already installed: $(bin_dir)"
    return
  fi
  [[ "$(id -u)" == 0 ]] || die "PostgreSQL is not installed; install the Debian package postgresql (as root)"
  command -v apt-get >/dev/null 2>&1 || die "PostgreSQL is not installed and apt-get is absent"
  # The package would create and start a cluster on port 5432; this script
  # runs its own, so ask postgresql-common not to.
  mkdir -p /etc/postgresql-common
  if [[ ! -f /etc/postgresql-common/createcluster.conf ]]; then
    echo "create_main_cluster = false" >/etc/postgresql-common/createcluster.conf
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q postgresql >/dev/null \
    || { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q postgresql >/dev/null; } \
    || die "apt-get install postgresql failed"
  bin_dir >/dev/null || die "postgresql installed but initdb/postgres not found"
  echo "installed postgresql: $(bin_dir)"
}

free_port() {
  python3 - <<'PY'
import socket
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])
s.close()
PY
}

# Runs a command as the cluster's OS user (root cannot run PostgreSQL).
as_owner() {
  if [[ "$(id -u)" == 0 ]]; then
    runuser -u "$OS_USER" -- "$@"
  else
    "$@"
  fi
}

pid_of() {
  [[ -f "$DATA/postmaster.pid" ]] && head -n1 "$DATA/postmaster.pid"
}

is_running() {
  local pid
  pid="$(pid_of 2>/dev/null)" && [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null
}

load_conf() {
  [[ -f "$CONF_FILE" ]] || die "no $CONF_FILE: the server was never started here; run: scripts/postgres.sh start"
  # shellcheck disable=SC1090
  . "$CONF_FILE"
}

cmd_start() {
  local bin
  bin="$(bin_dir)" || die "PostgreSQL not installed; run: scripts/postgres.sh install"
  if [[ -f "$CONF_FILE" ]]; then
    load_conf
    if is_running; then
      die "already running (pid $(pid_of)); run: scripts/postgres.sh stop"
    fi
    rm -rf "$BASE"
  fi
  mkdir -p "$STATE_DIR"
  local os_user=""
  if [[ "$(id -u)" == 0 ]]; then
    os_user="${WEFT_PG_OS_USER:-nobody}"
    id "$os_user" >/dev/null 2>&1 || die "OS user $os_user does not exist (set WEFT_PG_OS_USER)"
  fi
  local base
  base="$(mktemp -d /tmp/weft-pg.XXXXXX)"
  chmod 755 "$base"
  local data="$base/data"
  mkdir -p "$data"
  if [[ -n "$os_user" ]]; then chown -R "$os_user" "$base"; fi
  {
    echo "BIN=$bin"
    echo "BASE=$base"
    echo "DATA=$data"
    echo "OS_USER=$os_user"
    echo "PORT=$(free_port)"
    echo "ENV_OUT=$ENV_FILE"
  } >"$CONF_FILE.tmp"
  mv "$CONF_FILE.tmp" "$CONF_FILE"
  load_conf
  as_owner "$BIN/initdb" -D "$DATA" -U weft --auth=trust --encoding=UTF8 --locale=C \
    >"$BASE/initdb.log" 2>&1 || { cat "$BASE/initdb.log" >&2; die "initdb failed"; }
  cat >>"$DATA/postgresql.conf" <<EOF
# weft test server: loopback only, small, durable.
listen_addresses = '127.0.0.1'
port = $PORT
unix_socket_directories = ''
max_connections = 200
shared_buffers = 32MB
fsync = on
synchronous_commit = on
full_page_writes = on
max_wal_size = 256MB
logging_collector = off
log_min_messages = warning
EOF
  if [[ "${WEFT_PG_TLS:-1}" != 0 ]]; then make_certs; fi
  launch
  as_owner "$BIN/psql" -X -q -h 127.0.0.1 -p "$PORT" -U weft -d postgres \
    -c "CREATE DATABASE weft" >/dev/null || die "CREATE DATABASE failed"
  write_env
  echo "postgresql on 127.0.0.1:$PORT (pid $(pid_of), data $DATA); env file: $ENV_FILE"
}

# A root, a server certificate it signs (IP 127.0.0.1), and a second root
# that signs nothing, all in $BASE/tls; the server's key is its owner's.
make_certs() {
  command -v openssl >/dev/null 2>&1 || die "openssl is needed for the TLS test server (or WEFT_PG_TLS=0)"
  local t="$BASE/tls"
  mkdir -p "$t"
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
    -subj "/CN=weft test root" -keyout "$t/ca.key" -out "$t/ca.crt" >/dev/null 2>&1 \
    || die "openssl: the test root"
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
    -subj "/CN=weft other root" -keyout "$t/other.key" -out "$t/other-ca.crt" >/dev/null 2>&1 \
    || die "openssl: the other root"
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
    -subj "/CN=127.0.0.1" -keyout "$t/server.key" -out "$t/server.csr" >/dev/null 2>&1 \
    || die "openssl: the server's key"
  printf 'subjectAltName = IP:127.0.0.1\nbasicConstraints = CA:FALSE\nextendedKeyUsage = serverAuth\n' >"$t/ext"
  openssl x509 -req -in "$t/server.csr" -CA "$t/ca.crt" -CAkey "$t/ca.key" -CAcreateserial \
    -days 2 -extfile "$t/ext" -out "$t/server.crt" >/dev/null 2>&1 || die "openssl: the server's certificate"
  chmod 600 "$t/server.key"
  chmod 644 "$t/ca.crt" "$t/other-ca.crt"
  if [[ -n "$OS_USER" ]]; then chown -R "$OS_USER" "$t"; fi
  cat >>"$DATA/postgresql.conf" <<EOF
ssl = on
ssl_cert_file = '$t/server.crt'
ssl_key_file = '$t/server.key'
EOF
}

launch() {
  : >>"$BASE/server.log"
  if [[ -n "$OS_USER" ]]; then chown "$OS_USER" "$BASE/server.log"; fi
  as_owner "$BIN/pg_ctl" -D "$DATA" -l "$BASE/server.log" -w -t "$START_TIMEOUT_S" start >/dev/null \
    || { tail -n 30 "$BASE/server.log" >&2; die "the server did not start (log: $BASE/server.log)"; }
  is_running || die "the server exited after start (log: $BASE/server.log)"
}

write_env() {
  mkdir -p "$(dirname "$ENV_OUT")"
  {
    echo "export WEFT_TEST_PG_URL=postgres://weft@127.0.0.1:$PORT/weft"
    echo "export WEFT_TEST_PG_PID=$(pid_of)"
    echo "export WEFT_TEST_PG_RESTART=$SELF"
    if [[ -f "$BASE/tls/ca.crt" ]]; then
      echo "export WEFT_TEST_PG_CA=$BASE/tls/ca.crt"
      echo "export WEFT_TEST_PG_OTHER_CA=$BASE/tls/other-ca.crt"
    fi
  } >"$ENV_OUT.tmp"
  mv "$ENV_OUT.tmp" "$ENV_OUT"
}

# SIGINT (fast shutdown), then SIGKILL after $STOP_TIMEOUT_S; returns once
# the pid is gone.
stop_pid() {
  local pid="$1"
  kill -INT "$pid" 2>/dev/null || return 0
  local deadline=$((SECONDS + STOP_TIMEOUT_S))
  while kill -0 "$pid" 2>/dev/null; do
    if (( SECONDS >= deadline )); then
      echo "postgres.sh: pid $pid ignored SIGINT for ${STOP_TIMEOUT_S}s; sending SIGKILL" >&2
      kill -KILL "$pid" 2>/dev/null || true
      break
    fi
    sleep 0.1
  done
}

cmd_restart() {
  load_conf
  if is_running; then stop_pid "$(pid_of)"; fi
  launch
  write_env
  echo "postgresql restarted on 127.0.0.1:$PORT (pid $(pid_of))"
}

cmd_stop() {
  if [[ ! -f "$CONF_FILE" ]]; then
    echo "postgresql not running (no $CONF_FILE)"
    return 0
  fi
  load_conf
  local pid=""
  if is_running; then pid="$(pid_of)"; stop_pid "$pid"; fi
  rm -rf "$BASE"
  rm -f "$ENV_OUT" "$CONF_FILE"
  echo "postgresql stopped${pid:+ (pid $pid)}"
}

case "${1:-}" in
  install) cmd_install ;;
  start) cmd_start ;;
  restart) cmd_restart ;;
  stop) cmd_stop ;;
  env) echo "$ENV_FILE" ;;
  pid) load_conf; pid_of || die "not running" ;;
  *) die "usage: $0 install|start|restart|stop|env|pid" ;;
esac
