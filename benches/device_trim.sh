#!/bin/bash
# Moves the tracked files a GPU device call does not need out of the working tree, and back.
# The device tool sends the working tree (tracked and untracked-not-ignored files plus carried paths) only up
# to 64 MiB, and the tracked files alone are larger (docs/benchmarks.md, session 68, "Checkout size").
#   bash benches/device_trim.sh out [HOLD]   moves every *.expandable.json.gz trace, traces/held_out5/ and
#                                            docs/bench-results/ to HOLD (default /tmp/strata_device_hold)
#   bash benches/device_trim.sh in [HOLD]    puts them back
#   bash benches/device_trim.sh size         prints the bytes that would travel now, carried folders aside
# A run that replays held-out set 5 copies its *.default traces into the carried folder before `out`.
# With TRIM_TRACES=all, `out` moves every trace under traces/ (for calls that replay none).
set -e
cd "$(git rev-parse --show-toplevel)"
HOLD=${2:-/tmp/strata_device_hold}
case "$1" in
  out)
    mkdir -p "$HOLD"
    all=""; [ "${TRIM_TRACES:-}" = all ] && all=$(git ls-files 'traces/*.json.gz')
    for f in $(git ls-files '*.expandable.json.gz') $(git ls-files traces/held_out5 traces/held_out6 docs/bench-results) $all; do
      [ -e "$f" ] || continue
      mkdir -p "$HOLD/$(dirname "$f")"; mv "$f" "$HOLD/$f"
    done
    echo "moved to $HOLD; travelling now: $(bash "$0" size) bytes (limit 67108864)";;
  in)
    [ -d "$HOLD" ] || { echo "nothing held in $HOLD"; exit 1; }
    (cd "$HOLD" && find . -type f) | while read -r f; do mkdir -p "$(dirname "$f")"; mv "$HOLD/$f" "$f"; done
    git status --short | grep -q '^ D' && { echo "some tracked files are still missing:"; git status --short | grep '^ D'; exit 1; }
    echo "restored";;
  size)
    { git ls-files -z; git ls-files -z --others --exclude-standard; } | while IFS= read -r -d '' f; do [ -f "$f" ] && stat -c %s "$f"; done | awk '{s+=$1} END {print s+0}';;
  *) echo "usage: bash benches/device_trim.sh out|in|size [HOLD]"; exit 2;;
esac
