/* Shared helpers of the command-line tool: option parsing, number and id-list parsing, error printing. */
#ifndef TD_CLI_CLI_H
#define TD_CLI_CLI_H

#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>
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
/* --device cpu|cuda and --precision fp32|bf16 (NULL: cpu, fp32) into *device (td_device) and *precision
 * (td_precision); both are always written. For cuda the device is probed (td_device_probe) here, before any model is
 * loaded, so a build or machine without one fails at once. --precision bf16 on a CPU whose kernels (td_cpu_kernels,
 * TD_KERNELS) have no bf16 products is accepted with a note on stderr: that CPU computes fp32. desc (NULL, or
 * desc_len bytes) receives "cpu" or the probe's description of the GPU ("NVIDIA H200, 140 GiB"). Returns 0; 2 after
 * a usage error (a value other than those); 1 after printing "typedecide CMD: --device cuda: REASON". */
int cli_device(const char *cmd, const char *device_s, const char *precision_s, int32_t *device, int32_t *precision,
               char *desc, size_t desc_len);
/* The --precision lines of every --help: what is exact and what is not, in one sentence. */
#define CLI_PRECISION_HELP                                                                                             \
    "  --precision fp32|bf16  fp32 (default): exact, F32/F16/BF16 weights with fp32 activations, as transformers;\n"  \
    "                         bf16: faster, activations rounded to bf16 (CUDA: every product; CPU: BF16 weights\n"    \
    "                         with AVX-512 BF16 or AMX kernels; CUDA keeps an f32 KV cache in bf16, the same\n"       \
    "                         results). Q8_0/Q4_0 weights quantise activations either way\n"
/* "fp32" or "bf16": the name of a td_precision, for output. */
const char *cli_precision_name(int32_t precision);

/* Seconds on a monotonic clock. */
double cli_now(void);

/* Inputs. Every reader names the file and line, tells a read error or a directory from the end of a file, and
 * caps what it reads. */
#define CLI_MAX_JSONL ((size_t)256 << 20)  /* criteria, fixtures, predictions: the whole file */
#define CLI_MAX_LINE ((size_t)64 << 20)    /* one line of a JSONL stream */
#define CLI_MAX_TEXT ((size_t)1 << 20)     /* an instruction, a config */
/* How long a named pipe (FIFO) given as an input may take to deliver its first data. */
#define CLI_FIFO_WAIT_S 5
/* Opens a file for reading ('-' = standard input); NULL after printing why (missing, unreadable, a directory, a
 * named pipe that nothing writes to within CLI_FIFO_WAIT_S seconds). */
FILE *cli_open_input(const char *cmd, const char *path);
/* Reads a whole file ('-' = stdin) into a new NUL-terminated buffer (free()), at most cap bytes; NULL after
 * printing why (as cli_open_input, a read error, or more than cap bytes: "the most WHY_CAP"). */
char *cli_read_input(const char *cmd, const char *path, size_t cap, const char *why_cap, size_t *len);
/* The next line of f with its newline into *line (grown, free()): its length; -1 at the end; -2 on a read error;
 * -3 when longer than max bytes; -4 out of memory. cli_line_error prints the message of a negative result < -1. */
ssize_t cli_read_line(FILE *f, char **line, size_t *cap, size_t max);
int cli_line_error(const char *cmd, const char *path, long lineno, ssize_t r, size_t max);

/* Outputs. Standard output is flushed and closed once at the end of a command (typedecide.c): a write that failed
 * (a full disk) makes the command fail. Returns 0, or 1 after printing why. */
int cli_finish_output(const char *cmd);
/* 1 when a and b name the same existing file. */
int cli_same_file(const char *a, const char *b);
/* Refuses (prints why, returns 1) when out is one of the inputs, or a file inside an input directory (a model). */
int cli_refuse_overwrite(const char *cmd, const char *out, const char *const *inputs, int n);
/* The same for several outputs (td_paths_check): none may be an input, a file of an input directory or another
 * output, nor exist as anything but a regular file. NULL and "-" entries are skipped. 0, or 1 after printing why. */
int cli_check_paths(const char *cmd, const char *const *inputs, int n_in, const char *const *outputs, int n_out);
/* A text as a JSON string literal (quotes, escapes), malloc'ed; NULL when it is not UTF-8 or memory ran out. */
char *cli_json_string(const char *s);

/* --instruction: the text itself, or the contents of the file it names (at most CLI_MAX_TEXT bytes); NULL after
 * printing why for a directory, or for a path-like argument (no spaces; a '/', or ending in .txt or .md) that names
 * no file: a mistyped path never becomes the instruction. */
char *cli_instruction(const char *cmd, const char *arg);

/* Positions past the model's context (max_position_embeddings) are refused unless ctx_max (--ctx) allows them,
 * with a warning. `what` names what needs the positions ("the prompt + -n"). Returns 0, or 1 after printing why. */
int cli_check_context(const char *cmd, const td_model *m, long long needed, long long ctx_max, const char *what);

/* 1 if the path names an existing regular file; a directory. */
int cli_is_file(const char *path);
int cli_is_dir(const char *path);
/* 1 if the file starts with the GGUF magic. */
int cli_is_gguf(const char *path);
/* Prints "typedecide CMD: message" for the library's last error, without the status name (the message already
 * says what is wrong and where); returns 1. */
int cli_fail_msg(const char *cmd);

#endif
