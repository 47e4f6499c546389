/* typedecide decide: one typed decision per criterion over shared evidence, as JSON lines. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "commands.h"

static const char usage_text[] =
    "usage: typedecide decide --model DIR --criteria FILE.jsonl [--evidence FILE|-] [options]\n"
    "\n"
    "Reads the evidence once and answers every criterion with a probability for each option, read from the\n"
    "logits of the option letters after \"Answer:\". Prints one JSON line per criterion, in input order (when\n"
    "standard output is a terminal, a table instead: criterion, answer, probability bar, ms; --json/--table choose):\n"
    "  {\"id\", \"answer\": option id, \"letter\", \"options\": [ids in shown order], \"probs\": [same order],\n"
    "   \"allowed_mass\" (with --allowed-mass), \"suffix_tokens\", \"ms\"}\n"
    "Criteria lines: {\"id\", \"question\", \"options\": [{\"id\", \"description\"}, ...]} (an \"answer\" is ignored);\n"
    "a line may carry its own \"evidence\"; lines with equal evidence share one prefill. Only descriptions are\n"
    "shown to the model, never option ids. Up to 20 options (letters A..T).\n"
    "\n"
    "Prompt: head = INSTRUCTION + \"\\nEvidence:\\n\" + evidence; per criterion the suffix\n"
    "  \"\\nCriterion: {question}\\nOptions:\\nA. {description}\\nB. ...\\nAnswer:\"\n"
    "Default instruction:\n  %s\n"
    "\n"
    "  --model DIR          Hugging Face model directory with tokenizer.json\n"
    "  --adapter DIR        PEFT LoRA adapter, merged at load\n"
    "  --criteria FILE      criteria JSONL ('-' = stdin; at most 256 MiB)\n"
    "  --evidence FILE      evidence text, used verbatim ('-' = stdin) for lines without their own (at most 64\n"
    "                       bytes per token of the model's context, 64 KiB or more; a named pipe must deliver\n"
    "                       within 5 s)\n"
    "  --instruction T      instruction text, or a file holding it (a path that names no file is an error)\n"
    "  --letters ABCD...    option letters in order (default A..T); each must be one token after \"Answer:\"\n"
    "  --batch              all suffixes of an evidence in one forward pass over the shared prefix (default)\n"
    "  --serial             the prefix once, then each suffix on its own\n"
    "  --fresh              every criterion from scratch (the reference; same ids, nothing reused)\n"
    "  --batch-size N       at most N criteria per forward pass (default: as many as --memory allows)\n"
    "  --memory MB          memory budget for the context (default 1024; with --device cuda a quarter of the\n"
    "                       GPU's free memory): how many criteria share a forward pass, never a result\n"
    "  --kv f32|f16         KV cache precision (default f32; f16 halves its memory, results differ slightly)\n"
    "  --device cpu|cuda    where to compute (default cpu; cuda: a build with -DTD_CUDA=ON and an NVIDIA GPU)\n"
    CLI_PRECISION_HELP
    "  --allowed-mass       also report the share of the full-vocabulary softmax on the option letters\n"
    "  --slot-map FILE      write the letter slot map {version, model, separator, letters, keep, token_to_row}\n"
    "                       (written whole, beside itself, then renamed; never over an input)\n"
    "  --show-logits        also print the option letters' raw logits (\"logits\", same order as probs)\n"
    "  --threads N          worker threads (default: all cores); results do not depend on it\n"
    "  --quiet              no progress or slot map on stderr\n"
    "  --table              print a table (the default on a terminal): criterion, answer, probability bar, ms\n"
    "  --json               print JSON lines (the default when standard output is not a terminal)\n"
    "\"ms\" is the criterion's share of the wall time: the shared prefill divided among the criteria of its\n"
    "evidence, plus its share of the forward pass it ran in. Bit-identical probabilities in every mode.\n";

/* One JSON line per criterion, written by the library (the server's /v1/decide uses the same writer). */
static int print_decision(const td_criterion *r, const td_decision *dc, const char *letters, int allowed_mass,
                          int show_logits) {
    char *s = NULL;
    unsigned flags = (allowed_mass ? TD_DECISION_ALLOWED_MASS : 0u) | (show_logits ? TD_DECISION_LOGITS : 0u);
    td_status st = td_decision_json(r, dc, letters, flags, &s);
    if (st != TD_OK) return cli_fail("decide", st);
    puts(s);
    td_free(s);
    return 0;
}

/* Copies s into out (cap bytes) as at most `width` characters (UTF-8 code points), ending in "..." when cut, with
 * newlines and tabs as spaces; returns the number of characters written, for padding. */
static int fit(const char *s, int width, char *out, size_t cap) {
    int total = 0;
    for (const char *p = s; *p; p++) total += ((unsigned char)*p & 0xC0) != 0x80;
    int keep = total <= width ? total : width - 3, chars = 0;
    size_t n = 0;
    for (const char *p = s; *p && chars < keep && n + 8 < cap; chars++) {
        size_t cl = 1;
        while (p[cl] && ((unsigned char)p[cl] & 0xC0) == 0x80) cl++;
        if (cl == 1) out[n++] = *p == '\n' || *p == '\t' || *p == '\r' ? ' ' : *p;
        else memcpy(out + n, p, cl), n += cl;
        p += cl;
    }
    if (keep < total) memcpy(out + n, "...", 3), n += 3, chars += 3;
    out[n] = 0;
    return chars;
}

static void print_cell(const char *s, int width) {
    char buf[512];
    int w = fit(s, width, buf, sizeof buf);
    fputs(buf, stdout);
    for (; w < width + 2; w++) putchar(' ');
}

/* The table: one line per criterion, the answer's probability as a bar, then every option's probability. */
static void print_table(const td_rows *rs, const td_decision *dec, int32_t n, const char *letters) {
    print_cell("criterion", 40), print_cell("answer", 26);
    printf("%-31s %8s\n", "probability", "ms");
    for (int32_t i = 0; i < n; i++) {
        const td_criterion *c = &td_rows_get(rs, i)->criterion;
        const td_decision *d = &dec[i];
        char ans[256], bar[32];
        snprintf(ans, sizeof ans, "%c. %s", letters[d->best], c->descriptions[d->best]);
        int fill = (int)(d->probs[d->best] * 20.0f + 0.5f);
        for (int k = 0; k < 20; k++) bar[k] = k < fill ? '#' : '.';
        bar[20] = 0;
        print_cell(c->question && *c->question ? c->question : c->id, 40);
        print_cell(ans, 26);
        printf("[%s] %5.1f%%   %8.1f\n", bar, 100.0 * d->probs[d->best], d->ms);
        printf("    ");
        for (int32_t k = 0; k < c->n_options; k++) {
            char o[64];
            fit(c->option_ids[k], 18, o, sizeof o);
            printf("%s%c %s %.2f", k ? "  " : "", letters[k], o, d->probs[k]);
        }
        putchar('\n');
    }
}

int cmd_decide(int argc, char **argv) {
    const char *model_dir = NULL, *crit_path = NULL, *ev_path = NULL, *instr = NULL, *letters = NULL,
               *slot_path = NULL, *threads_s = NULL, *bs_s = NULL, *mem_s = NULL, *adapter = NULL, *kv_s = NULL,
               *device_s = NULL, *precision_s = NULL;
    int serial = 0, batch = 0, fresh = 0, allowed = 0, quiet = 0, show_logits = 0, table = 0, json = 0;
    const cli_opt opts[] = {{"model", 1, &model_dir, NULL},     {"criteria", 1, &crit_path, NULL},
                            {"evidence", 1, &ev_path, NULL},     {"instruction", 1, &instr, NULL},
                            {"letters", 1, &letters, NULL},      {"slot-map", 1, &slot_path, NULL},
                            {"threads", 1, &threads_s, NULL},    {"batch-size", 1, &bs_s, NULL},
                            {"memory", 1, &mem_s, NULL},         {"serial", 0, NULL, &serial},
                            {"batch", 0, NULL, &batch},          {"fresh", 0, NULL, &fresh},
                            {"allowed-mass", 0, NULL, &allowed}, {"quiet", 0, NULL, &quiet},
                            {"show-logits", 0, NULL, &show_logits}, {"adapter", 1, &adapter, NULL},
                            {"kv", 1, &kv_s, NULL},              {"table", 0, NULL, &table},
                            {"json", 0, NULL, &json},            {"device", 1, &device_s, NULL},
                            {"precision", 1, &precision_s, NULL}, {NULL, 0, NULL, NULL}};
    int r = cli_parse(argc, argv, opts, "decide", NULL, 0, NULL);
    if (r == 1) {
        printf(usage_text, td_decide_default_instruction());
        return 0;
    }
    if (r) return r;
    if (!model_dir || !crit_path) return cli_usage_error("decide", "--model and --criteria are required");
    if (serial + batch + fresh > 1) return cli_usage_error("decide", "choose one of --batch, --serial, --fresh");
    if (table && json) return cli_usage_error("decide", "choose one of --table, --json");
    if (!table && !json) table = isatty(STDOUT_FILENO); /* scripts read JSON lines; people read the table */
    if (ev_path && crit_path && strcmp(ev_path, "-") == 0 && strcmp(crit_path, "-") == 0)
        return cli_usage_error("decide", "--evidence and --criteria cannot both be stdin");
    td_decide_params p = td_decide_default_params();
    p.mode = serial ? TD_DECIDE_SERIAL : fresh ? TD_DECIDE_FRESH : TD_DECIDE_BATCH;
    p.allowed_mass = allowed;
    p.letters = letters;
    if (cli_kv("decide", kv_s, &p.kv_f16)) return 2;
    long long v;
    p.n_threads = cli_default_threads();
    if (threads_s) {
        if (cli_int(threads_s, 1, 1024, &v)) return cli_usage_error("decide", "--threads must be in 1..1024");
        p.n_threads = (int32_t)v;
    }
    if (bs_s) {
        if (cli_int(bs_s, 1, 1 << 20, &v)) return cli_usage_error("decide", "--batch-size must be in 1..1048576");
        p.max_batch = (int32_t)v;
    }
    if (mem_s) {
        if (cli_int(mem_s, 1, 1 << 24, &v)) return cli_usage_error("decide", "--memory must be a size in MB in 1..16777216");
        p.memory_mb = v;
    }
    if ((r = cli_device("decide", device_s, precision_s, &p.device, &p.precision, NULL, 0)) != 0) return r;

    td_rows *rs = NULL;
    size_t ev_len = 0, crit_len = 0;
    char *evidence = NULL, *instruction = NULL;
    char *crit_bytes = cli_read_input("decide", crit_path, CLI_MAX_JSONL, "a criteria file can be", &crit_len);
    int rc = 0;
    td_model *m = NULL;
    td_decider *d = NULL;
    td_decision *dec = NULL, *gdec = NULL;
    td_criterion *cs = NULL;
    const char **texts = NULL;
    size_t *lens = NULL;
    int32_t *group = NULL, *members = NULL, n_groups = 0;
    if (!crit_bytes) return 1;
    td_status st = td_rows_parse(crit_bytes, crit_len, crit_path, 0, &rs);
    free(crit_bytes);
    if (st != TD_OK) return cli_fail_msg("decide");
    int32_t n = td_rows_count(rs);
    if (n == 0) { /* nothing decided is not a result: an empty stream or file is an error */
        rc = cli_error("decide", "%s: no criteria in it: nothing to decide",
                       strcmp(crit_path, "-") ? crit_path : "standard input");
        goto done;
    }
    for (int32_t i = 0; i < n; i++)
        if (!td_rows_get(rs, i)->evidence && !ev_path) {
            rc = cli_error("decide", "%s:%d: row \"%s\" has no \"evidence\" and no --evidence was given", crit_path,
                           td_rows_get(rs, i)->line, td_rows_get(rs, i)->criterion.id);
            goto done;
        }
    const char *inputs[] = {crit_path, ev_path, instr && cli_is_file(instr) ? instr : NULL, model_dir, adapter};
    if (slot_path && cli_refuse_overwrite("decide", slot_path, inputs, 5)) {
        rc = 1;
        goto done;
    }
    if (instr && !(instruction = cli_instruction("decide", instr))) {
        rc = 1;
        goto done;
    }
    p.instruction = instruction;
    st = cli_load_model(model_dir, 1, quiet, adapter, &m);
    if (st == TD_OK) st = td_decider_new(m, &p, &d);
    if (st != TD_OK) {
        rc = cli_fail("decide", st);
        goto done;
    }
    /* the evidence: what the model can read, at most (a token is rarely longer than a few bytes; 64 is generous) */
    if (ev_path) {
        size_t cap = (size_t)64 * (size_t)td_model_n_ctx_train(m);
        char why[128];
        snprintf(why, sizeof why, "evidence can be for a model that reads %d tokens", td_model_n_ctx_train(m));
        if (!(evidence = cli_read_input("decide", ev_path, cap < 65536 ? 65536 : cap, why, &ev_len))) {
            rc = 1;
            goto done;
        }
    }
    if (!quiet) fprintf(stderr, "typedecide decide: slot map %s\n", td_decider_slot_map(d));
    if (slot_path) { /* written whole, beside itself, then renamed */
        const char *sm = td_decider_slot_map(d);
        size_t sl = strlen(sm);
        char *text = malloc(sl + 2);
        if (text) memcpy(text, sm, sl), memcpy(text + sl, "\n", 2);
        int bad = !text || td_file_write(slot_path, text, sl + 1, 0) != TD_OK;
        if (bad) rc = text ? cli_fail_msg("decide") : cli_error("decide", "out of memory");
        free(text);
        if (bad) goto done;
    }
    /* rows with the same evidence text form a group: one td_decide call, one prefill */
    size_t cnt = (size_t)(n ? n : 1);
    dec = calloc(cnt, sizeof *dec), gdec = calloc(cnt, sizeof *gdec), cs = calloc(cnt, sizeof *cs);
    texts = calloc(cnt, sizeof *texts), lens = calloc(cnt, sizeof *lens);
    group = calloc(cnt, sizeof *group), members = calloc(cnt, sizeof *members);
    if (!dec || !gdec || !cs || !texts || !lens || !group || !members) {
        rc = cli_error("decide", "out of memory");
        goto done;
    }
    for (int32_t i = 0; i < n; i++) {
        const td_row *row = td_rows_get(rs, i);
        texts[i] = row->evidence ? row->evidence : evidence;
        lens[i] = row->evidence ? row->evidence_len : ev_len;
    }
    if ((st = td_evidence_groups(texts, lens, n, group, members, &n_groups)) != TD_OK) {
        rc = cli_fail("decide", st);
        goto done;
    }
    for (int32_t at = 0, g = 0; at < n && rc == 0; g++) { /* members[] lists the rows group by group */
        const int32_t *rows = members + at;
        int32_t k = 0;
        while (at < n && group[members[at]] == g) cs[k++] = td_rows_get(rs, members[at++])->criterion;
        st = td_decide(d, texts[rows[0]], lens[rows[0]], cs, k, gdec);
        if (st != TD_OK) {
            rc = cli_fail("decide", st);
            break;
        }
        for (int32_t t = 0; t < k; t++) dec[rows[t]] = gdec[t];
        if (!quiet && n > 50) fprintf(stderr, "\rtypedecide decide: evidence %d of %d, %d criteria done", g + 1, n_groups, at);
    }
    if (!quiet && n > 50) fputc('\n', stderr);
    if (rc == 0) {
        if (table) print_table(rs, dec, n, td_decider_letters(d));
        else
            for (int32_t i = 0; i < n && rc == 0; i++)
                rc = print_decision(&td_rows_get(rs, i)->criterion, &dec[i], td_decider_letters(d), allowed, show_logits);
        if (!quiet) {
            td_decide_stats s = td_decider_stats(d);
            fprintf(stderr, "typedecide decide: %lld criteria over %d evidence texts: %lld forward passes, %lld head + %lld suffix tokens"
                            " (%lld of them shared between criteria and run once)\n",
                    (long long)s.criteria, n_groups, (long long)s.forwards, (long long)s.head_tokens,
                    (long long)s.suffix_tokens, (long long)s.shared_tokens);
        }
    }
done:
    free(dec), free(gdec), free(cs), free(texts), free(lens), free(group), free(members);
    free(evidence);
    free(instruction);
    td_decider_free(d);
    td_model_free(m);
    td_rows_free(rs);
    return rc;
}
