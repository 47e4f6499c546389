#!/usr/bin/env bash
# The shared library exports the public API and nothing else: its defined dynamic symbols (nm -D) are exactly the
# functions declared with TD_API in the headers of include/ (the core's typedecide.h and the applications'
# typedecide_eval.h, typedecide_run.h, typedecide_server.h), every one of those headers declares some, and no
# function of those headers lacks TD_API (the rule for a new public function: TD_API, its return type and its name
# on the declaration's first line).
set -uo pipefail
ROOT=${TD_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
LIB=${TD_LIB:?TD_LIB names the shared library}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }

# what the headers declare: TD_API [qualifiers and return type] td_name(
cat "$ROOT"/include/*.h >"$tmp/headers"
grep -oE '^TD_API [^(]*\btd_[a-z0-9_]+\(' "$tmp/headers" | grep -oE 'td_[a-z0-9_]+\($' | tr -d '(' | sort >"$tmp/declared"
# a declaration at the start of a line without TD_API (not a typedef of a function pointer)
grep -nE '^[a-z_][a-z0-9_ *]*\btd_[a-z0-9_]+\(' "$ROOT"/include/*.h | grep -vE ':(TD_API|typedef) ' >"$tmp/bare"
[ -s "$tmp/bare" ] && fail "public functions declared without TD_API (hidden in the shared library):
$(cat "$tmp/bare")"
for h in "$ROOT"/include/*.h; do
    n=$(grep -cE '^TD_API [^(]*\btd_[a-z0-9_]+\(' "$h")
    [ "$n" -ge 1 ] || fail "$(basename "$h") declares no TD_API function (a public header that is not checked here?)"
    echo "exports: $(basename "$h"): $n TD_API functions"
done
[ "$(wc -l <"$tmp/declared")" -ge 100 ] || fail "only $(wc -l <"$tmp/declared") TD_API declarations found in include/*.h"

# what the library exports: every defined dynamic symbol, with its type (T: text)
nm -D --defined-only "$LIB" >"$tmp/nm" || { echo "FAIL: nm -D $LIB" >&2; exit 1; }
awk '{print $NF}' "$tmp/nm" | sort >"$tmp/exported"
awk '$2 != "T" {print}' "$tmp/nm" >"$tmp/not_text"
[ -s "$tmp/not_text" ] && fail "exported symbols that are not functions:
$(cat "$tmp/not_text")"
comm -23 "$tmp/exported" "$tmp/declared" >"$tmp/extra"
comm -13 "$tmp/exported" "$tmp/declared" >"$tmp/missing"
[ -s "$tmp/extra" ] && fail "$(wc -l <"$tmp/extra") exported symbols that no header declares with TD_API:
$(head -n 40 "$tmp/extra")"
[ -s "$tmp/missing" ] && fail "$(wc -l <"$tmp/missing") public functions the library does not export (defined without the header in scope?):
$(cat "$tmp/missing")"
if [ "$fails" -gt 0 ]; then exit 1; fi
echo "exports: $(wc -l <"$tmp/exported") symbols of $(basename "$LIB"), all and only the TD_API functions of include/*.h"
