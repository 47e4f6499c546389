/* Decides every criterion of a JSONL file over one evidence text with the installed library, one JSON line each:
 *   cc decide.c $(pkg-config --cflags --libs typedecide) -o decide && ./decide MODEL EVIDENCE.txt CRITERIA.jsonl */
#include <stdio.h>
#include <stdlib.h>
#include <typedecide.h>

int main(int argc, char **argv) {
    if (argc != 4) return fprintf(stderr, "usage: %s MODEL EVIDENCE.txt CRITERIA.jsonl\n", argv[0]), 2;
    static char evidence[1 << 20];
    FILE *f = fopen(argv[2], "rb");
    size_t len = f ? fread(evidence, 1, sizeof evidence, f) : 0;
    if (!f || len == sizeof evidence) return fprintf(stderr, "%s: cannot read it, or over 1 MiB\n", argv[2]), 1;
    fclose(f);
    td_model *m = NULL; td_decider *d = NULL; td_rows *rows = NULL;
    td_status st = td_model_load(argv[1], NULL, &m);                     /* a Hugging Face directory or GGUF file */
    if (st == TD_OK) st = td_decider_new(m, NULL, &d);                   /* the option letters A..T, probed */
    if (st == TD_OK) st = td_rows_load(argv[3], 0, &rows);               /* {"id", "question", "options"} lines */
    int32_t n = rows ? td_rows_count(rows) : 0;
    td_criterion *c = calloc((size_t)n + 1, sizeof *c);
    td_decision *out = calloc((size_t)n + 1, sizeof *out);
    if (st == TD_OK && (!c || !out)) st = TD_ERR_NOMEM;
    for (int32_t i = 0; st == TD_OK && i < n; i++) c[i] = td_rows_get(rows, i)->criterion;
    if (st == TD_OK) st = td_decide(d, evidence, len, c, n, out);        /* the evidence is read once */
    for (int32_t i = 0; st == TD_OK && i < n; i++) {
        char *json = NULL;
        st = td_decision_json(&c[i], &out[i], td_decider_letters(d), TD_DECISION_NO_MS, &json);
        if (st == TD_OK) puts(json);
        td_free(json);
    }
    if (st != TD_OK) fprintf(stderr, "%s: %s\n", td_status_str(st), td_last_error());
    free(c), free(out), td_rows_free(rows), td_decider_free(d), td_model_free(m);
    return st != TD_OK;
}
