#!/usr/bin/env bash
# Opens the memory report of the `memory_report` example in headless Chromium
# (Debian's package, installed when missing) and checks what it drew: the
# timeline's series and reserved line, the top-allocations table's rows and
# the segment map. Writes a screenshot to docs/memory-report.png when asked:
#
#   ci/check_html.sh            # check only
#   ci/check_html.sh --screenshot
#
# Not wired into .ci/run (the lead decides).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
browser=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$browser" ]; then
    echo "installing chromium"
    sudo=""
    [ "$(id -u)" -ne 0 ] && sudo=sudo
    $sudo apt-get update -qq && $sudo apt-get install -y -qq chromium >/dev/null
    browser=$(command -v chromium)
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$root" && cargo build --release -q -p strata-examples --example memory_report)
(cd "$work" && STRATA_DEVICE=${STRATA_DEVICE:-cpu} "$root/target/release/examples/memory_report" >report.log)
flags=(--headless --no-sandbox --disable-gpu --disable-dev-shm-usage --virtual-time-budget=2000)
"$browser" "${flags[@]}" --dump-dom "file://$work/memory.html" >"$work/dom.html" 2>/dev/null
fail=0
count() { grep -o "$1" "$work/dom.html" | wc -l; }
expect() { # what, count, minimum
    if [ "$2" -ge "$3" ]; then echo "ok   $1: $2"; else echo "FAIL $1: $2 (want >= $3)"; fail=1; fi
}
expect "timeline svg" "$(count '<svg id="timeline"')" 1
expect "series paths" "$(count '<path class="series"')" 2
expect "reserved line" "$(count '<polyline id="reserved"')" 1
expect "top-allocation rows" "$(count '<tr class="alloc">')" 5
expect "segments drawn" "$(count '<g class="segment"')" 1
expect "call sites from the example" "$(count 'memory_report.rs:')" 1
if [ "${1:-}" = "--screenshot" ]; then
    "$browser" "${flags[@]}" --window-size=1100,1500 --screenshot="$root/docs/memory-report.png" \
        "file://$work/memory.html" 2>/dev/null
    echo "wrote docs/memory-report.png"
fi
exit $fail
