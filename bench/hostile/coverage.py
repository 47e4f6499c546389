"""Which probe cases the suite already covered (judged by hand): python3 coverage.py probe.json"""
import json, re, sys
rs = json.load(open(sys.argv[1]))
# case-name patterns that the suite (before this probe's additions) already checks in substance: the same command
# meeting the same hostile condition (tests/test_outputs, test_resume, test_merge, test_inputs, test_hostile, test_run,
# tests/serve/*.mjs); judged by hand from reading those files
COVERED = [
 r"^run out=input$", r"^run out=hardlink to input$", r"^run errors=criteria$", r"^run errors=\./o/x", r"^run summary=(out|input|criteria|symlink to input)$",
 r"^run out=/dev/null$", r"^run out=directory$", r"^run out=existing file no force$", r"^run --force over an existing",
 r"^tokenize --export-json onto the GGUF", r"^tokenize --export-json onto its own tokenizer.json --force$",
 r"^tokenize --export-json onto model safetensors --force$", r"^tokenize --export-json existing file$",
 r"^tokenize --export-json --force on a full disk", r"^synth into an existing model dir$", r"^synth --out a file$",
 r"^synth --force --tokenizer from inside", r"^export -o existing file no force$", r"^export --force on a full disk",
 r"^export fresh on a full disk", r"^export -o /dev/full$", r"^export -o model safetensors --force$",
 r"^export -o=model safetensors$", r"^export to a fresh file$", r"^evaluate --(out|predictions|plot)=fixture$",
 r"^evaluate --out=--predictions$", r"^evaluate --plot=--out$", r"^evaluate three outputs", r"^decide --slot-map=(dir|criteria)$",
 r"^logits out=model config$", r"^logits --out over an existing",
 r"^resume refused: (no provenance|not a results file|provenance of another input|provenance wrong version|other criteria|other model|other --letters|--allowed-mass added|other shard flag)",
 r"^resume with (duplicated line|out of order pair|gap|garbage line in the middle|blank lines|shard line in unsharded|NUL bytes line)",
 r"^resume with no out yet$", r"^resume of a complete run", r"^torn line 11 cut", r"^two runs on one out",
 r"^all four shards$", r"^merge refused: (missing shard|shard truncated|shard missing last line|shard of another corpus|errors file as shard|one shard twice via|overlapping|shards of mixed N|input as shard)",
 r"^merge --out = a shard$", r"^merge --out = a shard's errors$", r"^merge --errors = a shard$", r"^merge shard named OUT.tmp",
 r"^merge over old OUT and stale", r"^merge joins the shards' errors", r"^with --errors elsewhere$",
 r"^run --input (-|/dev/stdin|<\(cat docs\)|/dev/zero)$", r"^run --input fifo with no writer$", r"^run --criteria (/dev/zero|fifo no writer)$",
 r"^tokenize --tokenizer /dev/zero$", r"^decide --evidence fifo (full|no writer)$", r"^decide --evidence /dev/zero$", r"^tokenize --jsonl /dev/zero$",
 r"^chat piped NUL in line$", r"^run criteria sparse 300 MiB$", r"^decide with (config|tokenizer).json 300 MiB sparse$",
 r"^tokenize --tokenizer tokenizer.json 300 MiB", r"^run instruction 5 MiB", r"^run document line of 65 MiB$", r"^run document with evidence 50k words$",
 r"^run input with BOM before the first line$", r"^run with a bad line: id with NUL$", r"^decide evidence invalid UTF-8$",
 r"^chat --verbose: piped <\|im_start\|>system", r"^special tokens in a user message",
 r"^health$", r"^decide equals the CLI$", r"^POST /v1/(decide|chat/completions) with (empty body|open brace|array|invalid UTF-8 in string)$",
 r"^/v1/chat/completions bad field #(8|9|10|12|13|15|16)", r"^/v1/decide bad field #(0|2|4|5|6)", r"^unknown path$", r"^GET on a POST path$",
 r"^no key: 401$", r"^wrong key: 401$", r"^2 MB (body|chunked)", r"^body over small --max-body", r"^slowloris", r"^100 idle connections$",
 r"^stream disconnect after (0|200) bytes$", r"^plain request disconnect$", r"^concurrent 6 decide", r"^invalid UTF-8 in decide evidence$",
 r"^criteria as JSONL string$",
]
cov = [r for r in rs if any(re.search(p, r["name"]) for p in COVERED)]
print("cases: %d, covered in substance by the suite: %d, not covered: %d" % (len(rs), len(cov), len(rs) - len(cov)))
for a in dict.fromkeys(r["area"] for r in rs):
    n = sum(1 for r in rs if r["area"] == a); c = sum(1 for r in cov if r["area"] == a)
    print("  %s: %d of %d not covered" % (a, n - c, n))
