#!/usr/bin/env bash
# tests/test_serve_chat.sh on the hybrid demo-qwen35 (DeltaNet state: a dropped turn changes the prefix, so the server
# resumes from an older snapshot or prefills anew): 24 turns at the page's defaults (the first drop falls at turn 8-10,
# later when the sampled replies run short: a run of 14 turns once ended at 1,411 of 2,048 positions, no drop, which
# the page test counts as a failure), the forced failures likewise. Release only: under the sanitizers demo-qwen3's
# run covers the page.
ROOT=${TD_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
if [ -n "${TD_SANITIZED:-}" ]; then echo "skipped in the sanitizer build"; exit 0; fi
TD_CHAT_MODEL=$ROOT/models/demo-qwen35 TD_CHAT_TURNS=24 exec bash "$ROOT/tests/test_serve_chat.sh"
