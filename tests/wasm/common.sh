# Shared by the wasm tests (test_wasm*.sh, Node and Chromium): what is checked, the build, and the native
# references. Sourced with ROOT, BIN and tmp set; defines TOKS, MODELS, EV, CRIT, CORPUS.
CORPUS=tests/tokenizer/corpus.jsonl
TOKS=(fixtures/tokenizers/*/tokenizer.json fixtures/gguf/qwen35-tiny-vl-bf16.gguf)
EV=models/demo/ticket.txt
CRIT=models/demo/criteria.jsonl
MODELS=(models/demo-qwen3 models/demo-qwen35)
for d in fixtures/models/*/; do [ -f "$d/tokenizer.json" ] && [ -f "$d/config.json" ] && MODELS+=("${d%/}"); done
MODELS+=(fixtures/gguf/*.gguf)

fail() { echo "FAIL: $*" >&2; exit 1; }

# Skips (77) without a Chromium at $CHROMIUM (Debian's /usr/bin/chromium unless TD_CHROMIUM says otherwise).
CHROMIUM=${TD_CHROMIUM:-/usr/bin/chromium}
chromium_or_skip() { [ -x "$CHROMIUM" ] || { echo "SKIP: no chromium at $CHROMIUM"; exit 77; }; }

# node's flag for the WebSocket client the Chromium drivers use (built in from Node 22; a flag before).
node_ws_flag() { node -e 'process.exit(typeof WebSocket === "function" ? 0 : 1)' 2>/dev/null || echo --experimental-websocket; }

# Skips (77) where the toolchain is missing; builds the module (incremental: cheap when nothing changed).
wasm_build_or_skip() {
    if [ -n "${TD_SANITIZED:-}" ]; then echo "SKIP: the sanitizer build (the module does not depend on it)"; exit 77; fi
    command -v emcc >/dev/null || { echo "SKIP: emscripten is not installed (apt-get install emscripten)"; exit 77; }
    command -v node >/dev/null || fail "node is not installed"
    [ -x "$BIN" ] || fail "typedecide binary not found at $BIN"
    if ! web/fetch_deps.sh; then
        echo "SKIP: Debian's source packages of PCRE2, utf8proc, jansson cannot be fetched"; exit 77; fi
    web/build.sh >/dev/null 2>"$tmp/build.log" || { cat "$tmp/build.log" >&2; fail "web/build.sh failed"; }
}

# $tmp/native-I.ids per tokenizer (the spaces of the tool's arrays removed), $tmp/native.jsonl for the models
native_refs() {
    local i=0 t m
    for t in "${TOKS[@]}"; do
        "$BIN" tokenize --tokenizer "$t" --jsonl "$CORPUS" | tr -d ' ' >"$tmp/native-$i.ids" || fail "native tokenize $t"
        i=$((i + 1))
    done
    : >"$tmp/native.jsonl"
    for m in "${MODELS[@]}"; do
        echo "# $m" >>"$tmp/native.jsonl"
        TD_KERNELS=scalar "$BIN" decide --quiet --model "$m" --evidence "$EV" --criteria "$CRIT" \
            >>"$tmp/native.jsonl" 2>"$tmp/native.log" || { cat "$tmp/native.log" >&2; fail "native decide on $m"; }
    done
}
