#!/usr/bin/env bash
# A bounded fuzz run of every target in fuzz/ (by hand; CI replays the
# committed corpus on stable instead, see crates/weft/tests/local/fuzz_corpus.rs).
#
#   scripts/fuzz.sh            # 60 s per target
#   scripts/fuzz.sh 300        # 300 s per target
#   scripts/fuzz.sh 30 frame_decode cursor_decode
#
# Needs a nightly toolchain and cargo-fuzz (`rustup toolchain install
# nightly`, `cargo install cargo-fuzz`). New corpus entries land in
# fuzz/corpus/<target>/ (commit the useful ones); a finding is written to
# fuzz/artifacts/<target>/ and fails the run.
set -euo pipefail
cd "$(dirname "$0")/../fuzz"

seconds="${1:-60}"
shift || true
targets=("$@")
if (( ${#targets[@]} == 0 )); then
  mapfile -t targets < <(cargo +nightly fuzz list)
fi
command -v cargo-fuzz >/dev/null 2>&1 || { echo "fuzz.sh: cargo-fuzz is not installed" >&2; exit 1; }
rustup toolchain list | grep -q '^nightly' || { echo "fuzz.sh: no nightly toolchain" >&2; exit 1; }

for t in "${targets[@]}"; do
  echo "== $t: ${seconds}s"
  cargo +nightly fuzz run "$t" -- -max_total_time="$seconds"
done
