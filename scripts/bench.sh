#!/usr/bin/env bash
# weft's benchmarks against raw baselines and opendata-buffer 0.3.
#
#   scripts/bench.sh --quick            # smoke: every workload, one short
#                                       # iteration (CI); results in
#                                       # target/bench-results/
#   scripts/bench.sh                    # full run (by hand, ~25 min on 2
#                                       # cores); results and plots in
#                                       # docs/bench/
#   scripts/bench.sh --only bucket-write --runs 5   # any weft-bench option
#   scripts/bench.sh --only pg          # the PostgreSQL workloads (pg-append,
#                                       # pg-lag) against their baselines
#
# Builds crates/weft-bench (its own workspace, so the peer crates never
# enter the library's build) into the root target/, starts a private
# SeaweedFS server and a private PostgreSQL server (scripts/seaweedfs.sh,
# scripts/postgres.sh, own state dirs, so test servers of this checkout may
# keep running), runs weft-bench, and stops both by PID on exit.
# WEFT_BENCH_QUICK=1 is the same as --quick.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$(pwd)"

quick=0
out=""
args=()
while (($#)); do
  case "$1" in
    --quick) quick=1 ;;
    --out) out="$2"; shift ;;
    --out=*) out="${1#--out=}" ;;
    *) args+=("$1") ;;
  esac
  shift
done
case "${WEFT_BENCH_QUICK:-}" in 1|true|yes|on) quick=1 ;; esac
unset WEFT_BENCH_QUICK
if [[ -z "$out" ]]; then
  if ((quick)); then out="$ROOT/target/bench-results"; else out="$ROOT/docs/bench"; fi
fi
if ((quick)); then args+=(--quick); fi

# CARGO_TARGET_DIR, when set, is honoured (a worktree sharing a build).
target_dir="${CARGO_TARGET_DIR:-$ROOT/target}"
cargo build --release \
  --manifest-path crates/weft-bench/Cargo.toml \
  --target-dir "$target_dir"
BIN="$target_dir/release/weft-bench"

export WEFT_S3_STATE_DIR="$ROOT/.tmp/seaweedfs-bench"
export WEFT_S3_ENV_FILE="$WEFT_S3_STATE_DIR/env"
export WEFT_PG_STATE_DIR="$ROOT/.tmp/postgres-bench"
# Rows stay comparable with runs before the test server offered TLS.
export WEFT_PG_TLS=0
export WEFT_PG_ENV_FILE="$WEFT_PG_STATE_DIR/env"
scripts/seaweedfs.sh install
scripts/postgres.sh install
# The S3 server keeps deleted objects' space until a vacuum; drop its data
# on exit so runs do not fill the disk. postgres.sh stop deletes its data.
trap 'scripts/seaweedfs.sh stop; rm -rf "$WEFT_S3_STATE_DIR/data"; scripts/postgres.sh stop' EXIT
scripts/seaweedfs.sh start
scripts/postgres.sh start

# The dir-backend workloads write under the system temp dir unless
# WEFT_BENCH_DATA_DIR says otherwise.
data=()
if [[ -n "${WEFT_BENCH_DATA_DIR:-}" ]]; then data=(--data-dir "$WEFT_BENCH_DATA_DIR"); fi

"$BIN" --s3-env "$WEFT_S3_ENV_FILE" --pg-env "$WEFT_PG_ENV_FILE" --out "$out" "${data[@]}" "${args[@]}"
