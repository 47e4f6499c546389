#!/usr/bin/env python3
"""Sums up a bench/cuda_device.sh run (the folder the device tool brought back: cuda.jsonl, steps.log, machine.txt,
decide-clients-h200.json) as one JSON object and prints issue 43's acceptance table, ours beside the peers measured
in the same call, with each line's target. Standard library only (it runs on the GPU host at the end of the call).
Usage: cuda_summary.py DIR [OUT.json]   (bench/cuda_summary.sh calls it)"""
import json
import os
import re
import sys


def load_jsonl(path):
    rows = []
    for line in open(path):
        line = line.strip()
        if line:
            try:
                rows.append(json.loads(line))
            except ValueError:
                pass
    return rows


def section_lines(log, name, pattern):
    """lines of steps.log's '== name ...' section that match pattern"""
    out, on = [], False
    for line in log:
        if line.startswith("== "):
            on = line.startswith("== %s " % name)
            continue
        if on and re.search(pattern, line):
            out.append(line.rstrip("\n"))
    return out


def num(x, digits=1):
    if x is None:
        return "-"
    if isinstance(x, str):
        return x
    if abs(x) >= 100:
        return "{:,.0f}".format(x)
    return "{:.{}f}".format(x, digits if abs(x) >= 1 else 3)


def main():
    d = sys.argv[1]
    out_path = sys.argv[2] if len(sys.argv) > 2 else None
    rows = load_jsonl(os.path.join(d, "cuda.jsonl"))
    log = open(os.path.join(d, "steps.log")).readlines() if os.path.exists(os.path.join(d, "steps.log")) else []
    machine = open(os.path.join(d, "machine.txt")).read() if os.path.exists(os.path.join(d, "machine.txt")) else ""
    gpu = (re.search(r"NVIDIA H[0-9A-Z]+[^|]*?(?=\s{2}|\|)", machine) or re.search(r"NVIDIA \S+", machine))
    manifest = machine.split("== manifest\n", 1)[1].split("\n== ", 1)[0].strip() if "== manifest\n" in machine else ""
    end = next((r for r in rows if r.get("step") == "end"), {})
    models = {r["model"]: r.get("config") for r in rows if r.get("step") == "model"}
    res = {}  # (step, model, precision) -> result
    for r in rows:
        if "model" in r and r.get("step") not in ("model",):
            res[(r["step"], r["model"], r.get("precision"))] = r.get("result")

    def get(step, model, prec, *keys):
        v = res.get((step, model, prec))
        for k in keys:
            if not isinstance(v, dict):
                return None
            v = v.get(k)
        return v

    def llama(model, pred, key):
        arr = res.get((pred[0], model, "f16"))
        if not isinstance(arr, list):
            return None
        for x in arr:
            if pred[1](x):
                return x.get(key)
        return None

    ceiling = None
    for m in models:
        ceiling = ceiling or get("transformers", m, "bf16", "ceiling", "tflops")

    table = {}
    for m, cfg in models.items():
        t = {}
        params = get("prefill", m, "bf16", "params") or get("prefill", m, "fp32", "params")
        lin = None
        if params and cfg and cfg.get("vocab_size") and cfg.get("hidden_size"):
            lin = params - cfg["vocab_size"] * cfg["hidden_size"] * (1 if cfg.get("tie_word_embeddings") else 2)

        def share(tokens_per_s):
            if not (lin and ceiling and tokens_per_s):
                return None
            return round(2 * lin * tokens_per_s / (ceiling * 1e12), 6)

        one_llama_ms = llama(m, ("llama_one", lambda x: x.get("n_gen") == 0), "avg_ns")
        one_llama_ms = one_llama_ms / 1e6 if one_llama_ms else None
        t["prefill_tokens_per_s"] = {
            "ours_bf16": get("prefill", m, "bf16", "tokens_per_s"), "ours_fp32": get("prefill", m, "fp32", "tokens_per_s"),
            "transformers_bf16": get("transformers", m, "bf16", "prefill", "tokens_per_s"),
            "llama_cpp_f16": llama(m, ("llama_pp_tg", lambda x: x.get("n_gen") == 0), "avg_ts"),
            "target": ">= 200,000 and >= 2x transformers"}
        t["decode_batch1_tokens_per_s"] = {
            "ours_bf16": get("decode", m, "bf16", "tokens_per_s"), "ours_fp32": get("decode", m, "fp32", "tokens_per_s"),
            "transformers_bf16": get("transformers", m, "bf16", "decode", "tokens_per_s"),
            "llama_cpp_f16": llama(m, ("llama_pp_tg", lambda x: x.get("n_prompt") == 0), "avg_ts"),
            "target": ">= 1,500"}
        sfx = get("decide", m, "bf16", "suffix") or 45
        t["decide_criteria_per_s"] = {
            "shape": "256-token evidence, 144 criteria x 45 tokens x 4 options",
            "ours_bf16": get("decide", m, "bf16", "criteria_per_s"), "ours_fp32": get("decide", m, "fp32", "criteria_per_s"),
            "transformers_bf16": get("transformers", m, "bf16", "decide", "criteria_per_s"),
            "llama_cpp_f16_one_at_a_time": 1e3 / one_llama_ms if one_llama_ms else None,
            "ours_bf16_matrix_share_of_ceiling": share((get("decide", m, "bf16", "criteria_per_s") or 0) * sfx),
            "target": ">= 10,000 (qwen3-0.6b)"}
        serial = get("one_criterion", m, "bf16", "mode") == "serial"  # an older binary: the serial suffix time
        one_key = "suffix_ms_per_criterion" if serial else "ms_per_criterion"
        t["one_criterion_ms"] = {
            "ours_bf16": get("one_criterion", m, "bf16", one_key),
            "ours_fp32": get("one_criterion", m, "fp32", one_key),
            "ours_how": "serial suffix time over a prefilled evidence (bench decide --serial)" if serial else
                        "a whole td_decide_ids call of one criterion, evidence kept prefilled (bench decide --cache-head)",
            "ours_bf16_suffix_only": get("one_criterion", m, "bf16", "suffix_ms_per_criterion"),
            "transformers_bf16": get("transformers", m, "bf16", "one_criterion", "ms"),
            "llama_cpp_f16_p45_d256": one_llama_ms, "target": "<= 1"}
        t["evidences16_criteria_per_s"] = {
            "ours_bf16": get("multi", m, "bf16", "criteria_per_s"), "ours_fp32": get("multi", m, "fp32", "criteria_per_s"),
            "ours_bf16_forwards_per_call": get("multi", m, "bf16", "forwards_per_call"),
            "ours_bf16_ms_per_call": get("multi", m, "bf16", "ms_per_call"),
            "ours_bf16_host_tokenize_ms_per_call": get("multi", m, "bf16", "host_tokenize_ms_per_call"),
            "ours_bf16_verified_alone": {"criteria": get("multi", m, "bf16", "verified_criteria"),
                                         "mismatched": get("multi", m, "bf16", "verify_mismatched")},
            "ours_bf16_tokens": {"prefill_per_evidence": get("multi", m, "bf16", "prefill_tokens_per_evidence"),
                                 "suffix_per_criterion": get("multi", m, "bf16", "suffix_tokens_per_criterion")},
            "transformers_bf16_evidence_by_evidence": get("transformers", m, "bf16", "decide_evidences", "criteria_per_s"),
            "target": "stated"}
        t["prefill_matrix_share_of_ceiling"] = {"ours_bf16": share(get("prefill", m, "bf16", "tokens_per_s")),
                                                "transformers_bf16": share(get("transformers", m, "bf16", "prefill", "tokens_per_s"))}
        t["run_documents_per_s"] = get("run", m, "bf16", "documents_per_s")
        t["run"] = res.get(("run", m, "bf16"))
        serve = {}
        for (step, mm, _), v in res.items():
            if mm == m and step.startswith("serve_") and isinstance(v, dict):
                serve[step[6:] + "_streams"] = {k: v.get(k) for k in ("aggregate_tokens_per_s", "per_stream_tokens_per_s_median",
                                                                      "ttft_ms_p50", "ttft_ms_max", "completion_tokens", "failed")}
        t["serve_chat_streams"] = serve or None
        inv = {}
        for what, key in (("prefill", "tokens_per_s"), ("decode", "tokens_per_s"), ("decide", "criteria_per_s")):
            a, b = get(what, m, "bf16", key), get("variant_" + what, m, "bf16", key)
            if b is not None:
                inv[what] = {"invariant": a, "batch_variant": b, "invariant_over_variant": round(a / b, 4) if a and b else None}
        t["batch_invariance_cost_bf16"] = inv or None
        t["non_embedding_params"] = lin
        pf, tfp = t["prefill_tokens_per_s"]["ours_bf16"], t["prefill_tokens_per_s"]["transformers_bf16"]
        dec, dcd = t["decode_batch1_tokens_per_s"]["ours_bf16"], t["decide_criteria_per_s"]["ours_bf16"]
        one = t["one_criterion_ms"]["ours_bf16"]
        t["targets_met"] = {
            "prefill_200k_and_2x_transformers": None if pf is None else bool(pf >= 200000 and (tfp is None or pf >= 2 * tfp)),
            "prefill_over_transformers": round(pf / tfp, 3) if pf and tfp else None,
            "decode_1500": None if dec is None else dec >= 1500,
            "decode_over_llama_cpp": round(dec / t["decode_batch1_tokens_per_s"]["llama_cpp_f16"], 3)
            if dec and t["decode_batch1_tokens_per_s"]["llama_cpp_f16"] else None,
            "decide_10000": None if dcd is None else dcd >= 10000,
            "one_criterion_1ms": None if one is None else one <= 1.0}
        table[m] = t

    dc = None
    p = os.path.join(d, "decide-clients-h200.json")
    if os.path.exists(p):
        try:
            dc = json.load(open(p)).get("summary")
        except ValueError:
            dc = "unreadable"

    steps = [{k: r.get(k) for k in ("step", "model", "precision", "rc", "seconds")} for r in rows
             if r.get("step") not in ("model", "end")]
    summary = {
        "what": "issue 43 (CUDA part 2) on the H200: bench/cuda_device.sh, summed up by bench/cuda_summary.sh",
        "gpu": gpu.group(0).strip() if gpu else None, "build": manifest, "device": end.get("device"),
        "seconds": end.get("seconds"), "skipped": end.get("skipped"),
        "bf16_ceiling_tflops": ceiling,
        "matrix_share_note": "2 x non-embedding parameters per token (attention's score products not counted) over the "
                             "torch bf16 8192^3 product measured in the same call",
        "table": table, "decide_clients_issue46": dc, "steps": steps,
        "kernels": section_lines(log, "kernels", r"^[a-z_, ]+:|max|all checks|failed"),
        "engine": section_lines(log, "engine", r"^(parity|demo models|decide|test_cuda_engine|qwen|models/)"),
        "clients": section_lines(log, "clients", r'^\{"check"|^clients'),
        "sanitizers": [l.rstrip("\n") for l in log if re.match(r"^== (memcheck|racecheck)|.*(ERROR SUMMARY|RACECHECK SUMMARY)", l)],
        "transformers_bf16_on_fixtures": [json.loads(l) for l in section_lines(log, "fixture", r"^\{")],
        "models": models,
    }
    if out_path:
        with open(out_path, "w") as f:
            json.dump(summary, f, indent=1)

    # the table, last in the output
    lines = []
    hdr = "%-34s %12s %12s %13s %12s  %s" % ("", "ours bf16", "ours fp32", "transformers", "llama.cpp", "target")
    for m, t in table.items():
        lines.append("== %s (%s)" % (m, summary["gpu"] or "?"))
        lines.append(hdr)
        for label, key, ll in (("prefill 2048 (tokens/s)", "prefill_tokens_per_s", "llama_cpp_f16"),
                               ("decode batch 1 (tokens/s)", "decode_batch1_tokens_per_s", "llama_cpp_f16"),
                               ("decide 144x45x4 / 256 (criteria/s)", "decide_criteria_per_s", "llama_cpp_f16_one_at_a_time"),
                               ("one criterion, prefilled (ms)", "one_criterion_ms", "llama_cpp_f16_p45_d256"),
                               ("16 evidences x 144 (criteria/s)", "evidences16_criteria_per_s", None)):
            r = t[key]
            tf = r.get("transformers_bf16", r.get("transformers_bf16_evidence_by_evidence"))
            lines.append("%-34s %12s %12s %13s %12s  %s" % (label, num(r.get("ours_bf16")), num(r.get("ours_fp32")), num(tf),
                                                           num(r.get(ll)) if ll else "-", r.get("target", "")))
        tm = t["targets_met"]
        yn = lambda v: "-" if v is None else "met" if v else "NOT met"
        lines.append("targets (bf16): prefill %s (%sx transformers), decode %s (%sx llama.cpp), decide %s, one criterion %s" % (
            yn(tm["prefill_200k_and_2x_transformers"]), num(tm["prefill_over_transformers"], 2), yn(tm["decode_1500"]),
            num(tm["decode_over_llama_cpp"], 2), yn(tm["decide_10000"]) if m.startswith("qwen3-") else "(stated)",
            yn(tm["one_criterion_1ms"])))
        v = t["evidences16_criteria_per_s"]["ours_bf16_verified_alone"]
        if v["criteria"] is not None:
            e16 = t["evidences16_criteria_per_s"]
            lines.append("16 evidences x 144: %s passes, %s ms per call of which %s ms tokenizing the prompts on the host; "
                         "each evidence alone: %s of %s criteria differ (bit for bit)" % (
                             num(e16["ours_bf16_forwards_per_call"], 2), num(e16["ours_bf16_ms_per_call"]),
                             num(e16["ours_bf16_host_tokenize_ms_per_call"]), v["mismatched"], v["criteria"]))
        if t["batch_invariance_cost_bf16"]:
            lines.append("batch invariance (bf16, invariant / batch-variant build): " + ", ".join(
                "%s %s / %s = %s" % (k, num(v["invariant"]), num(v["batch_variant"]), num(v["invariant_over_variant"], 3))
                for k, v in t["batch_invariance_cost_bf16"].items()))
        sh = t["decide_criteria_per_s"].get("ours_bf16_matrix_share_of_ceiling")
        psh = t["prefill_matrix_share_of_ceiling"]["ours_bf16"]
        lines.append("matrix share of the %s TFLOP/s bf16 ceiling: decide %s, prefill %s" % (
            num(ceiling), "-" if sh is None else "%.2f%%" % (100 * sh), "-" if psh is None else "%.2f%%" % (100 * psh)))
        run = t["run"] if isinstance(t["run"], dict) else {}
        if run:
                lines.append("run %s docs x 12 criteria: %s documents/s%s" % (
                run.get("documents", "-"), num(t["run_documents_per_s"]),
                " (cut at the cap: %s written in %s s)" % (run.get("documents_written"), num(run.get("wall_s"))) if run.get("cut_at_cap") else ""))
        for k, v in (t["serve_chat_streams"] or {}).items():
            lines.append("serve %s: %s tokens/s aggregate, %s per stream, ttft p50 %s ms, failed %s" % (
                k.replace("_", " "), num(v["aggregate_tokens_per_s"]), num(v["per_stream_tokens_per_s_median"]),
                num(v["ttft_ms_p50"]), v["failed"]))
    if isinstance(dc, dict):
        for m, v in dc.items():
            lines.append("issue 46 /v1/decide %s: one at a time %s, concurrent %s criteria/s, ratio %s (target >= 3), mismatched %s" % (
                m, num(v.get("one_at_a_time_criteria_per_s")), num(v.get("concurrent_criteria_per_s")), num(v.get("ratio"), 2),
                v.get("mismatched")))
    checks = []
    for s_ in steps:
        if s_["step"] in ("kernels", "engine", "clients", "fixture") or s_["step"].startswith(("memcheck", "racecheck")):
            checks.append("%s %s" % (s_["step"], "ok" if s_["rc"] == 0 else "rc %s" % s_["rc"]))
    errs = [re.sub(r"^=+ ", "", l).strip() for l in summary["sanitizers"] if "SUMMARY" in l]
    if checks:
        lines.append("checks: " + ", ".join(checks) + ("; sanitizers: " + "; ".join(sorted(set(errs))) if errs else ""))
    bad = [s for s in steps if s.get("rc") not in (0, None)]
    lines.append("steps: %d run, %d failed%s; skipped: %s; %s s" % (
        len(steps), len(bad), (" (" + ", ".join("%s %s rc %s" % (s["step"], s.get("model") or "", s["rc"]) for s in bad) + ")") if bad else "",
        summary["skipped"] or "none", summary["seconds"]))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
