#!/usr/bin/env bash
# Local loop for bucket tests: start SeaweedFS, run the given cargo test
# arguments (default: the weft package's tests, server tier included) with
# its env, stop it.
#   scripts/dev-s3-test.sh --test servers producer_s3::
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
scripts/seaweedfs.sh install
scripts/seaweedfs.sh start
trap 'scripts/seaweedfs.sh stop' EXIT
# shellcheck disable=SC1090
source "$(scripts/seaweedfs.sh env)"
cargo test -p weft --features server-tests "$@"
