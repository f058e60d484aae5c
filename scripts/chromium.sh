#!/usr/bin/env bash
# Headless Chromium and its WebDriver server on 127.0.0.1, for the console's
# browser test (crates/weft-cli/tests/servers/console_browser.rs).
#
#   scripts/chromium.sh install   # Debian's chromium and chromium-driver when absent
#   scripts/chromium.sh start     # start chromedriver on a free port, write the env file
#   scripts/chromium.sh stop      # stop it by PID (bounded wait)
#   scripts/chromium.sh env       # print the env file path
#
# `start` writes $WEFT_CHROMIUM_ENV_FILE (default .tmp/chromium/env), to be
# sourced before `cargo test`:
#   WEFT_TEST_WEBDRIVER_URL  http://127.0.0.1:PORT (chromedriver)
#   WEFT_TEST_CHROMIUM       the browser binary the test asks chromedriver to run
#   WEFT_TEST_WEBDRIVER_PID  chromedriver's PID
#
# chromedriver binds to the loopback interface and accepts connections from
# 127.0.0.1 only; each test session starts its own headless browser.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
STATE_DIR="${WEFT_CHROMIUM_STATE_DIR:-$ROOT/.tmp/chromium}"
ENV_FILE="${WEFT_CHROMIUM_ENV_FILE:-$STATE_DIR/env}"
PID_FILE="$STATE_DIR/chromedriver.pid"
LOG_FILE="$STATE_DIR/chromedriver.log"
START_TIMEOUT_S="${WEFT_CHROMIUM_START_TIMEOUT:-30}"
STOP_TIMEOUT_S="${WEFT_CHROMIUM_STOP_TIMEOUT:-10}"

die() { echo "chromium.sh: $*" >&2; exit 1; }

browser() {
  local b
  for b in chromium chromium-browser; do
    if command -v "$b" >/dev/null 2>&1; then command -v "$b"; return; fi
  done
  return 1
}

cmd_install() {
  if browser >/dev/null && command -v chromedriver >/dev/null 2>&1; then
    echo "chromium already installed: $(browser), $(command -v chromedriver)"
    return
  fi
  [[ "$(id -u)" == 0 ]] || die "chromium is not installed; install the Debian packages chromium and chromium-driver (as root)"
  command -v apt-get >/dev/null 2>&1 || die "chromium is not installed and apt-get is absent"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium chromium-driver >/dev/null \
    || { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium chromium-driver >/dev/null; } \
    || die "apt-get install chromium chromium-driver failed"
  browser >/dev/null && command -v chromedriver >/dev/null 2>&1 || die "installed, but chromium or chromedriver not found"
  echo "installed chromium: $(browser), $(command -v chromedriver)"
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

running_pid() {
  local pid
  [[ -f "$PID_FILE" ]] || return 1
  pid="$(cat "$PID_FILE")"
  [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null && echo "$pid"
}

cmd_start() {
  command -v chromedriver >/dev/null 2>&1 || die "chromedriver not installed; run: scripts/chromium.sh install"
  local chrome
  chrome="$(browser)" || die "chromium not installed; run: scripts/chromium.sh install"
  if pid="$(running_pid)"; then die "already running (pid $pid); run: scripts/chromium.sh stop"; fi
  mkdir -p "$STATE_DIR"
  local port
  port="$(free_port)"
  # setsid: its own process group, so a Ctrl-C of the caller does not take
  # it down before `stop` runs; stop kills it by PID.
  setsid chromedriver --port="$port" --allowed-ips=127.0.0.1 --log-level=WARNING \
    >"$LOG_FILE" 2>&1 </dev/null &
  local pid=$!
  echo "$pid" >"$PID_FILE"
  local deadline=$((SECONDS + START_TIMEOUT_S))
  until python3 - "$port" <<'PY' 2>/dev/null
import sys, urllib.request
urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/status", timeout=1).read()
PY
  do
    kill -0 "$pid" 2>/dev/null || { cat "$LOG_FILE" >&2; die "chromedriver exited at start (log: $LOG_FILE)"; }
    (( SECONDS < deadline )) || { kill "$pid" 2>/dev/null || true; die "chromedriver did not answer within ${START_TIMEOUT_S}s"; }
    sleep 0.2
  done
  mkdir -p "$(dirname "$ENV_FILE")"
  {
    echo "export WEFT_TEST_WEBDRIVER_URL=http://127.0.0.1:$port"
    echo "export WEFT_TEST_CHROMIUM=$chrome"
    echo "export WEFT_TEST_WEBDRIVER_PID=$pid"
  } >"$ENV_FILE.tmp"
  mv "$ENV_FILE.tmp" "$ENV_FILE"
  echo "chromedriver on 127.0.0.1:$port (pid $pid, browser $chrome); env file: $ENV_FILE"
}

cmd_stop() {
  local pid
  if ! pid="$(running_pid)"; then
    rm -f "$PID_FILE" "$ENV_FILE"
    echo "chromedriver not running"
    return 0
  fi
  kill -TERM "$pid" 2>/dev/null || true
  local deadline=$((SECONDS + STOP_TIMEOUT_S))
  while kill -0 "$pid" 2>/dev/null; do
    if (( SECONDS >= deadline )); then
      echo "chromium.sh: pid $pid ignored SIGTERM for ${STOP_TIMEOUT_S}s; sending SIGKILL" >&2
      kill -KILL "$pid" 2>/dev/null || true
      break
    fi
    sleep 0.1
  done
  rm -f "$PID_FILE" "$ENV_FILE" "$LOG_FILE"
  echo "chromedriver stopped (pid $pid)"
}

case "${1:-}" in
  install) cmd_install ;;
  start) cmd_start ;;
  stop) cmd_stop ;;
  env) echo "$ENV_FILE" ;;
  *) die "usage: $0 install|start|stop|env" ;;
esac
