/* Shared helpers of the command-line tool: option parsing, number and id-list parsing, error printing. */
#ifndef TD_CLI_CLI_H
#define TD_CLI_CLI_H

#include <stddef.h>
#include <stdint.h>

#include "typedecide.h"

typedef struct cli_opt {
    const char *name;   /* without the leading "--"; a one-letter name also matches "-x" */
    int takes_value;    /* 1: "--name VALUE" or "--name=VALUE"; 0: a flag */
    const char **value; /* where the value goes (options that take one) */
    int *flag;          /* set to 1 when given (flags) */
} cli_opt;

/* Parses argv[1..] against opts. Positional arguments go to positional[0..max_pos-1] (*n_pos receives the count).
 * Returns 0 on success, 1 if --help/-h was given, 2 on a usage error (already printed to stderr). */
int cli_parse(int argc, char **argv, const cli_opt *opts, const char *cmd, const char **positional, int max_pos,
              int *n_pos);

/* Prints "typedecide CMD: message" to stderr; returns 1 (an exit code) or 2 for usage errors via cli_usage_error. */
int cli_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prints the library's last error after a failed call; returns 1. */
int cli_fail(const char *cmd, td_status st);

/* Parses a whole decimal integer in [lo, hi]; returns 0 on success. */
int cli_int(const char *s, long long lo, long long hi, long long *out);
/* Parses a float; returns 0 on success. */
int cli_double(const char *s, double *out);
/* Parses "1,2,3" (spaces allowed, a JSON-style "[1, 2]" too) into a new array; returns 0 on success. */
int cli_ids(const char *s, int32_t **ids, size_t *n);

/* Prints ids as a JSON array followed by a newline. */
void cli_print_ids(const int32_t *ids, size_t n);

/* Loads a model (and merges a LoRA adapter, when given) with the tool's logging: info lines on stderr unless
 * quiet. */
td_status cli_load_model(const char *path, int want_tokenizer, int quiet, const char *adapter, td_model **out);

/* Worker threads to use by default: the number of online CPUs. */
int cli_default_threads(void);
/* --kv: "f32" (0) or "f16" (1); NULL leaves *kv_f16 alone. Returns 0, or prints a usage error and returns 2. */
int cli_kv(const char *cmd, const char *s, int32_t *kv_f16);

/* Seconds on a monotonic clock. */
double cli_now(void);

/* Reads a whole file ('-' = standard input) into a new NUL-terminated buffer (free()); NULL on failure, with the
 * reason in errno. */
char *cli_read_file(const char *path, size_t *len);
/* 1 if the path names an existing regular file; a directory. */
int cli_is_file(const char *path);
int cli_is_dir(const char *path);
/* 1 if the file starts with the GGUF magic. */
int cli_is_gguf(const char *path);
/* Prints "typedecide CMD: message" for the library's last error, without the status name (the message already
 * says what is wrong and where); returns 1. */
int cli_fail_msg(const char *cmd);

#endif
