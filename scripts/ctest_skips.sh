#!/usr/bin/env bash
# ctest_skips.sh BUILD_DIR: after a ctest run, one line per skipped test with
# the reason it printed ("SKIP: ..." lines, once per test however many PEs
# printed it), read from BUILD_DIR/Testing/Temporary/LastTest.log.
set -euo pipefail
build=${1:?usage: ctest_skips.sh BUILD_DIR}
summary=$build/ctest-summary.txt log=$build/Testing/Temporary/LastTest.log
[ -f "$summary" ] && [ -f "$log" ] || exit 0
skipped=$(sed -n 's/.*Test *#[0-9]*: \([^ ]*\) .*\*\*\*Skipped.*/\1/p' "$summary")
[ -n "$skipped" ] || exit 0
echo
echo "Skipped tests ($(wc -l <<<"$skipped")) and why:"
awk -v names="$skipped" '
  BEGIN { n = split(names, a, "\n"); for (i = 1; i <= n; i++) { want[a[i]] = 1; order[i] = a[i] } }
  / Test: / { name = $NF; out = 0; next }
  /^Output:/ { out = 1; next }
  /^<end of output>/ { out = 0; next }
  out && /SKIP:/ && (name in want) {
    why = $0; sub(/.*SKIP: */, "", why)
    if (!((name, why) in seen)) { seen[name, why] = 1; r = nr[name]++ ? reasons[name] "; " why : why; reasons[name] = r }
  }
  END { for (i = 1; i <= n; i++) printf "  %-32s %s\n", order[i], (nr[order[i]] ? reasons[order[i]] : "(printed no SKIP line)") }
' "$log"
