#!/usr/bin/env bash
# An Azurite Blob server (Microsoft's Azure Storage emulator) on 127.0.0.1
# for weft's Azure tests.
#
#   scripts/azurite.sh install   # npm ci in tools/azurite (azurite pinned by its lock file)
#   scripts/azurite.sh start     # start azurite-blob, create the container, write the env file
#   scripts/azurite.sh stop      # stop it (bounded wait)
#   scripts/azurite.sh env       # print the env file path
#
# `start` writes $WEFT_AZURITE_ENV_FILE (default .tmp/azurite/env), to be
# sourced before `cargo test`:
#   WEFT_TEST_AZURE_ENDPOINT, WEFT_TEST_AZURE_CONTAINER,
#   AZURE_STORAGE_ACCOUNT_NAME, AZURE_STORAGE_ACCOUNT_KEY,
#   WEFT_TEST_AZURITE_DATA_DIR, WEFT_TEST_AZURITE_PID
#
# The port is chosen free at start and the server binds 127.0.0.1 only, so
# several servers (one per worktree, CI) can run side by side. The account
# is not the emulator's well-known one: each start makes a fresh key, so a
# test that silently fell back to the published emulator key would fail.
# Telemetry is off; only the blob service runs (one process, one PID).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TOOL_DIR="$ROOT/tools/azurite"
AZURITE_VERSION="3.37.0"
STATE_DIR="${WEFT_AZURITE_STATE_DIR:-$ROOT/.tmp/azurite}"
ENV_FILE="${WEFT_AZURITE_ENV_FILE:-$STATE_DIR/env}"
PID_FILE="$STATE_DIR/pid"
LOG_FILE="$STATE_DIR/azurite.log"
ACCOUNT="weftdev"
CONTAINER="${WEFT_TEST_AZURE_CONTAINER:-weft-test}"
START_TIMEOUT_S="${WEFT_AZURITE_START_TIMEOUT:-60}"
STOP_TIMEOUT_S="${WEFT_AZURITE_STOP_TIMEOUT:-20}"

die() { echo "azurite.sh: $*" >&2; exit 1; }

need() {
  command -v "$1" >/dev/null 2>&1 || die "$1 is needed ($2)"
}

azurite_bin() {
  local bin="$TOOL_DIR/node_modules/.bin/azurite-blob"
  [[ -x "$bin" ]] || die "azurite-blob not found at $bin; run: scripts/azurite.sh install"
  echo "$bin"
}

installed_version() {
  local pkg="$TOOL_DIR/node_modules/azurite/package.json"
  [[ -f "$pkg" ]] || return 0
  node -p "require(process.argv[1]).version" "$pkg" 2>/dev/null || true
}

cmd_install() {
  need node "to run Azurite"
  need npm "to install Azurite"
  if [[ "$(installed_version)" == "$AZURITE_VERSION" ]]; then
    echo "azurite $AZURITE_VERSION already installed: $(azurite_bin)"
    return
  fi
  # `npm ci` installs exactly what package-lock.json pins. Azurite declares
  # it wants a newer Node than some machines have; it runs on Node 20, so
  # the engine warnings are expected.
  npm ci --prefix "$TOOL_DIR" --no-audit --no-fund --loglevel=error
  [[ "$(installed_version)" == "$AZURITE_VERSION" ]] \
    || die "installed azurite is $(installed_version), expected $AZURITE_VERSION"
  echo "installed azurite $AZURITE_VERSION: $(azurite_bin)"
}

free_port() {
  need python3 "to pick a free port"
  python3 - <<'PY'
import socket
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])
s.close()
PY
}

# True once *Azurite* answers on the port (its Server header names it), so
# a different process that took the port in a race is not mistaken for it.
port_answers() {
  curl -s -o /dev/null -D - --max-time 2 "http://127.0.0.1:$1/" 2>/dev/null \
    | grep -qi '^server: *azurite-blob'
}

is_running() {
  [[ -f "$PID_FILE" ]] && kill -0 "$(cat "$PID_FILE")" 2>/dev/null
}

cmd_start() {
  need curl "to probe the server"
  need python3 "to create the container"
  local bin
  bin="$(azurite_bin)"
  if is_running; then
    die "already running (pid $(cat "$PID_FILE")); run: scripts/azurite.sh stop"
  fi
  mkdir -p "$STATE_DIR"
  local data="$STATE_DIR/data"
  rm -rf "$data"
  mkdir -p "$data"

  local port key
  port="$(free_port)"
  key="$(head -c 64 /dev/urandom | base64 -w0)"

  AZURITE_ACCOUNTS="$ACCOUNT:$key" \
    nohup "$bin" \
      --blobHost 127.0.0.1 --blobPort "$port" \
      --location "$data" \
      --disableTelemetry \
      >"$LOG_FILE" 2>&1 </dev/null &
  local pid=$!
  echo "$pid" >"$PID_FILE"

  local deadline=$((SECONDS + START_TIMEOUT_S))
  until port_answers "$port"; do
    if ! kill -0 "$pid" 2>/dev/null; then
      tail -n 30 "$LOG_FILE" >&2 || true
      rm -f "$PID_FILE"
      die "azurite-blob exited during start-up (log: $LOG_FILE)"
    fi
    if (( SECONDS >= deadline )); then
      tail -n 30 "$LOG_FILE" >&2 || true
      cmd_stop || true
      die "blob port $port did not answer within ${START_TIMEOUT_S}s (log: $LOG_FILE)"
    fi
    sleep 0.3
  done

  local endpoint="http://127.0.0.1:$port/$ACCOUNT"
  local rc
  while true; do
    rc=0
    AZURE_STORAGE_ACCOUNT_NAME="$ACCOUNT" AZURE_STORAGE_ACCOUNT_KEY="$key" \
      python3 "$ROOT/scripts/azurite-container.py" "$endpoint" "$CONTAINER" || rc=$?
    (( rc == 0 )) && break
    if (( rc != 2 || SECONDS >= deadline )); then
      tail -n 30 "$LOG_FILE" >&2 || true
      cmd_stop || true
      die "could not create container $CONTAINER (log: $LOG_FILE)"
    fi
    sleep 0.3
  done

  local tmp="$ENV_FILE.tmp"
  mkdir -p "$(dirname "$ENV_FILE")"
  cat >"$tmp" <<EOF
export WEFT_TEST_AZURE_ENDPOINT=$endpoint
export WEFT_TEST_AZURE_CONTAINER=$CONTAINER
export AZURE_STORAGE_ACCOUNT_NAME=$ACCOUNT
export AZURE_STORAGE_ACCOUNT_KEY=$key
export WEFT_TEST_AZURITE_DATA_DIR=$data
export WEFT_TEST_AZURITE_PID=$pid
EOF
  mv "$tmp" "$ENV_FILE"
  echo "azurite blob on $endpoint (pid $pid, container $CONTAINER); env file: $ENV_FILE"
}

cmd_stop() {
  if [[ ! -f "$PID_FILE" ]]; then
    echo "azurite not running (no $PID_FILE)"
    return 0
  fi
  local pid
  pid="$(cat "$PID_FILE")"
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    local deadline=$((SECONDS + STOP_TIMEOUT_S))
    while kill -0 "$pid" 2>/dev/null; do
      if (( SECONDS >= deadline )); then
        echo "azurite.sh: pid $pid ignored SIGTERM for ${STOP_TIMEOUT_S}s; sending SIGKILL" >&2
        kill -KILL "$pid" 2>/dev/null || true
        break
      fi
      sleep 0.2
    done
  fi
  rm -f "$PID_FILE" "$ENV_FILE"
  echo "azurite stopped (pid $pid)"
}

case "${1:-}" in
  install) cmd_install ;;
  start) cmd_start ;;
  stop) cmd_stop ;;
  env) echo "$ENV_FILE" ;;
  *) die "usage: $0 install|start|stop|env" ;;
esac
