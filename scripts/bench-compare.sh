#!/usr/bin/env bash
# A feature step's cost, as its closing note gives it: the `serve` bench (the closed loop over HTTP
# and the stored turn) of a base revision and of the working tree, built into one target directory
# and run in turn, interleaved, ROUNDS times each (default 3). Prints each run's lines, labelled.
#
#   scripts/bench-compare.sh [BASE (origin/main, else main)] [ROUNDS]
#   BENCH=throughput scripts/bench-compare.sh …   (another bench target: router level 1, run-flow, a turn)
#
# Builds take a while (release); nothing else should run while the benches do.
set -euo pipefail
base=${1:-$(git rev-parse --verify -q origin/main >/dev/null && echo origin/main || echo main)}
rounds=${2:-3}
bench=${BENCH:-serve}
repo=$(git rev-parse --show-toplevel)
work=$(mktemp -d)
target=${CARGO_TARGET_DIR:-$repo/target}
trap 'git -C "$repo" worktree remove --force "$work/base" >/dev/null 2>&1; rm -rf "$work"' EXIT
git -C "$repo" worktree add -f "$work/base" "$base" >/dev/null
build() { # build DIR OUT: the bench of DIR, copied to OUT
    # A worktree's files are older than the last build's outputs: touch them, or cargo reuses those.
    find "$1" -name '*.rs' -not -path '*/target/*' -exec touch {} +
    (cd "$1" && CARGO_TARGET_DIR=$target cargo bench --bench "$bench" --no-run --message-format short 2>&1) \
        | sed -n 's/.*Executable .*(\(.*\))/\1/p' | tail -1 | xargs -I{} cp {} "$2"
}
build "$work/base" "$work/serve-base"
build "$repo" "$work/serve-head"
for i in $(seq "$rounds"); do
    order="base head"; [ $((i % 2)) -eq 0 ] && order="head base"
    for side in $order; do
        dir=$repo; [ "$side" = base ] && dir=$work/base
        (cd "$dir" && "$work/serve-$side" --bench) | sed "s/^/$side /"
    done
done
