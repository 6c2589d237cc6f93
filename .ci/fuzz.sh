#!/usr/bin/env bash
# libFuzzer smoke runs: each fuzz target for FUZZ_SECONDS (default 60)
# from the committed corpus, under AddressSanitizer (cargo-fuzz's default). New
# corpus entries go to a scratch folder; the committed corpus is only read.
# `just fuzz` runs 10 million executions per target instead. Needs the nightly
# toolchain and cargo-fuzz (installed under CI=true; skipped with a printed line
# elsewhere when there is no nightly).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
seconds="${FUZZ_SECONDS:-60}"
runs="${FUZZ_RUNS:-}"

if ! ensure_nightly; then
    skip_step "fuzzing" "needs the nightly toolchain (rustup toolchain install nightly)" && exit 0
    exit 1
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
    log "installing cargo-fuzz"
    cargo install cargo-fuzz --locked
fi

cd fuzz
cargo +nightly fuzz build
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
# The targets run side by side (libFuzzer is one thread each), each into its log.
run_target() {
    local target="$1"
    mkdir -p "$scratch/$target"
    if [ -n "$runs" ]; then limit=(-runs="$runs"); else limit=(-max_total_time="$seconds"); fi
    cargo +nightly fuzz run "$target" "$scratch/$target" "corpus/$target" -- \
        "${limit[@]}" -rss_limit_mb=4096 -print_final_stats=1 >"$scratch/$target.log" 2>&1
}
targets=(frames attributes)
log "fuzz ${targets[*]} (${runs:+$runs runs}${runs:-$seconds s} each, side by side)"
pids=()
for target in "${targets[@]}"; do
    run_target "$target" &
    pids+=($!)
done
failed=0
for i in "${!targets[@]}"; do
    target="${targets[$i]}"
    if ! wait "${pids[$i]}"; then
        tail -n 80 "$scratch/$target.log"
        echo "fuzz target $target failed (the input is in fuzz/artifacts/$target/)" >&2
        failed=1
        continue
    fi
    echo "$target:"
    grep -E '^(Done|stat::number_of_executed_units)' "$scratch/$target.log"
done
exit "$failed"
