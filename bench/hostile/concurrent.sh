#!/usr/bin/env bash
# The probe's "two runs on one out" cases (resume area) again with a 600 s limit instead of 120 s, for a slow binary
# (the ASan/UBSan build on a loaded machine): two runs of the probe's big corpus on one --out, the second started
# 0, 0.3, 0.6, 0.9 s later (plain, --resume, plain, --resume); one must exit 0, the other be refused naming the lock,
# and r.jsonl equal the reference run's bytes.
#   bash bench/hostile/concurrent.sh BIN PROBE_REF_DIR   (PROBE_REF_DIR: a probe's $W/ref, with big.jsonl,
#                                                          big.r.jsonl and crit.jsonl)
set -u
BIN=$1 REF=$2
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp" || exit 1
fails=0
for k in 0 1 2 3; do
    mkdir c$k && cp "$REF/big.jsonl" "$REF/crit.jsonl" c$k/ && cd c$k || exit 1
    R="$BIN run --model $ROOT/models/demo-qwen3 --input big.jsonl --criteria crit.jsonl --out r.jsonl --no-timing --quiet --threads 2"
    t0=$(date +%s)
    timeout 600 $R 2>a.err & a=$!
    sleep "$(awk -v k=$k 'BEGIN { print 0.3 * k }')"
    extra=
    [ $((k % 2)) = 1 ] && extra=--resume
    timeout 600 $R $extra 2>b.err & b=$!
    wait $a; ra=$?
    wait $b; rb=$?
    t1=$(date +%s)
    cmp -s r.jsonl "$REF/big.r.jsonl" && same=yes || same=no
    san=$(grep -lE 'runtime error|AddressSanitizer|LeakSanitizer' a.err b.err | tr '\n' ' ')
    lock=$(cat a.err b.err | grep -c 'another typedecide run is writing it')
    echo "case #$k: rc $ra $rb, $((t1 - t0)) s, equals reference: $same, sanitizer: ${san:-none}, refused naming the lock: $lock"
    { [ "$same" = yes ] && [ -z "$san" ] && [ "$lock" = 1 ] && [ "$(echo "$ra $rb" | tr ' ' '\n' | sort | tr '\n' ' ')" = "0 1 " ]; } || fails=$((fails + 1))
    cd ..
done
[ $fails = 0 ]
