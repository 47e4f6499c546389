/* Criteria / fixture rows from JSONL: {"id", "family", "evidence", "question", "options": [{"id", "description"}],
 * "answer"}. Every problem is reported with its file and line. Shared by decide and evaluate. */
#ifndef TD_TOOLS_ROWS_H
#define TD_TOOLS_ROWS_H

#include <stddef.h>

#include "typedecide.h"

typedef struct row {
    int line;             /* 1-based line in the file */
    char *id, *family, *question, *answer; /* family/answer may be NULL */
    char *evidence;       /* NULL when the row has none */
    size_t evidence_len;
    int n_options;
    char **option_ids, **descriptions;
} row;

typedef struct rows {
    row *v;
    int n;
} rows;

/* Reads every line of path ('-' = stdin); blank lines are skipped. On the first bad line, prints
 * "typedecide CMD: FILE:LINE: what is wrong" and returns 1 (with skip_bad, prints it, counts it in *skipped and goes
 * on). require_answer: an "answer" field naming one of the options is required. */
int rows_load(const char *cmd, const char *path, int require_answer, int skip_bad, rows *out, int *skipped);
void rows_free(rows *r);
/* Releases one row's contents. */
void row_free(row *r);

/* The row as a td_criterion (borrowing its strings). */
td_criterion row_criterion(const row *r);

#endif
