/* typedecide tokenize: text -> ids (one JSON array per input), ids -> text with --decode, or the tokenizer as a
 * Hugging Face tokenizer.json with --export-json. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"

static const char usage_text[] =
    "usage: typedecide tokenize (--model M | --tokenizer FILE) [--no-special] [--no-nfc]\n"
    "                           (--text STR | --jsonl FILE | --decode IDS | --decode-jsonl FILE | --export-json OUT)\n"
    "\n"
    "Encodes text exactly as Hugging Face tokenizers does (added tokens split out, NFC, the Split regex of\n"
    "tokenizer.json, byte-level BPE) and prints the ids as one JSON array per input; or writes the tokenizer as a\n"
    "Hugging Face tokenizer.json, so that a tokenizer known only from a GGUF file can be used by any tool.\n"
    "\n"
    "  --model M         model directory holding tokenizer.json, or a GGUF file: only its tokenizer.ggml.* metadata\n"
    "                    is read, whatever its architecture and whether or not it holds weights (llama.cpp's\n"
    "                    vocabulary-only models/ggml-vocab-*.gguf load too); tokenizer.ggml.model must be \"gpt2\"\n"
    "                    and tokenizer.ggml.pre one of qwen2, qwen35\n"
    "  --tokenizer FILE  a tokenizer.json file, or a GGUF file as above\n"
    "  --text STR        encode STR, print one JSON array\n"
    "  --jsonl FILE      encode the \"text\" field of every line of FILE ('-' = stdin), one array per line\n"
    "  --decode IDS      decode comma-separated ids and print the text as a JSON string\n"
    "  --decode-jsonl F  decode one JSON array of ids per line of F ('-' = stdin), one JSON string per line\n"
    "  --export-json OUT write the tokenizer as a Hugging Face tokenizer.json to OUT ('-' = stdout): the form\n"
    "                    tokenizers saves Qwen's in; it and Hugging Face's tokenizers read it back to the same ids.\n"
    "                    OUT is written whole (beside itself, then renamed); it may not be an input (the GGUF, the\n"
    "                    model's files); an existing OUT is replaced only with --force\n"
    "  --force           replace an existing --export-json OUT\n"
    "  --no-special      treat added tokens such as <|im_start|> as plain text\n"
    "  --no-nfc          (GGUF only) leave out the NFC normalizer, as llama.cpp does: llama.cpp's ids, which differ\n"
    "                    from Hugging Face's only on text that is not in NFC (an export then has no normalizer)\n"
    "Caps: tokenizer.json (a file or a model's) 256 MiB, and a regular file; a --jsonl / --decode-jsonl line\n"
    "64 MiB.\n";

static int tokenize_one(const td_tokenizer *tok, const char *text, size_t len, unsigned flags, const char *where) {
    int32_t *ids;
    size_t n;
    td_status st = td_tokenize(tok, text, len, flags, &ids, &n);
    if (st != TD_OK) {
        fprintf(stderr, "typedecide tokenize: %s: %s\n", where, td_last_error());
        return 1;
    }
    cli_print_ids(ids, n);
    td_free(ids);
    return 0;
}

/* Prints the decoded text of ids as one JSON string line. */
static int print_decoded(const td_tokenizer *tok, const int32_t *ids, size_t n, const char *where) {
    char *out;
    size_t len;
    td_status st = td_detokenize(tok, ids, n, &out, &len);
    if (st != TD_OK) {
        fprintf(stderr, "typedecide tokenize: %s: %s\n", where, td_last_error());
        return 1;
    }
    json_t *js = json_stringn(out, len);
    char *text = json_dumps(js, JSON_ENCODE_ANY | JSON_ENSURE_ASCII);
    puts(text);
    free(text);
    json_decref(js);
    td_free(out);
    return 0;
}

static int decode_each_line(const td_tokenizer *tok, const char *path) {
    FILE *f = cli_open_input("tokenize", path);
    if (!f) return 1;
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    int rc = 0;
    long lineno = 0;
    int32_t *ids = NULL;
    while (rc == 0 && (len = cli_read_line(f, &line, &cap, CLI_MAX_LINE)) >= 0) {
        lineno++;
        const char *l = line;
        if (lineno == 1 && len >= 3 && memcmp(l, "\xef\xbb\xbf", 3) == 0) l += 3, len -= 3; /* a byte-order mark */
        json_error_t e;
        json_t *a = json_loadb(l, (size_t)len, 0, &e);
        size_t n = json_is_array(a) ? json_array_size(a) : 0;
        int32_t *nv = realloc(ids, (n ? n : 1) * sizeof *ids);
        if (!nv) rc = cli_error("tokenize", "out of memory");
        else ids = nv;
        for (size_t i = 0; rc == 0 && i < n; i++) {
            json_t *v = json_array_get(a, i);
            if (!json_is_integer(v) || json_integer_value(v) < INT32_MIN || json_integer_value(v) > INT32_MAX)
                rc = cli_error("tokenize", "%s:%ld: element %zu is not a token id", path, lineno, i);
            else ids[i] = (int32_t)json_integer_value(v);
        }
        if (rc == 0 && !json_is_array(a))
            rc = cli_error("tokenize", "%s:%ld: %s", path, lineno, a ? "expected a JSON array of ids" : e.text);
        if (rc == 0) {
            char where[64];
            snprintf(where, sizeof where, "line %ld", lineno);
            rc = print_decoded(tok, ids, n, where);
        }
        json_decref(a);
    }
    if (rc == 0 && len < -1) rc = cli_line_error("tokenize", path, lineno + 1, len, CLI_MAX_LINE);
    free(ids);
    free(line);
    if (f != stdin) fclose(f);
    return rc;
}

static int tokenize_jsonl(const td_tokenizer *tok, const char *path, unsigned flags) {
    FILE *f = cli_open_input("tokenize", path);
    if (!f) return 1;
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    int rc = 0;
    long lineno = 0;
    while ((len = cli_read_line(f, &line, &cap, CLI_MAX_LINE)) >= 0) {
        lineno++;
        const char *l = line;
        if (lineno == 1 && len >= 3 && memcmp(l, "\xef\xbb\xbf", 3) == 0) l += 3, len -= 3; /* a byte-order mark */
        json_error_t e;
        json_t *o = json_loadb(l, (size_t)len, JSON_ALLOW_NUL, &e);
        json_t *t = o ? json_object_get(o, "text") : NULL;
        if (!o || !json_is_string(t)) {
            rc = cli_error("tokenize", "%s:%ld: %s", path, lineno,
                           o ? "expected an object with a string field \"text\"" : e.text);
            json_decref(o);
            break;
        }
        char where[64];
        snprintf(where, sizeof where, "line %ld", lineno);
        rc = tokenize_one(tok, json_string_value(t), json_string_length(t), flags, where);
        json_decref(o);
        if (rc) break;
    }
    if (rc == 0 && len < -1) rc = cli_line_error("tokenize", path, lineno + 1, len, CLI_MAX_LINE);
    free(line);
    if (f != stdin) fclose(f);
    return rc;
}

/* Writes the tokenizer.json text to path ('-' = standard output): a file is written beside itself and renamed into
 * place when whole, so a full disk leaves the old file (or none), never a truncated one. */
static int export_json(const td_tokenizer *tok, const char *path) {
    char *json;
    td_status st = td_tokenizer_to_json(tok, &json);
    if (st != TD_OK) return cli_fail("tokenize", st);
    size_t n = strlen(json);
    int rc = 0;
    if (strcmp(path, "-") == 0) {
        if (fwrite(json, 1, n, stdout) != n || fflush(stdout) != 0)
            rc = cli_error("tokenize", "writing the tokenizer.json to standard output failed");
    } else if (td_file_write(path, json, n, 0) != TD_OK) {
        rc = cli_error("tokenize", "cannot write the tokenizer.json: %s", td_last_error());
    }
    td_free(json);
    return rc;
}

int cmd_tokenize(int argc, char **argv) {
    const char *model = NULL, *file = NULL, *text = NULL, *jsonl = NULL, *decode = NULL, *decode_jsonl = NULL;
    const char *export_path = NULL;
    int no_special = 0, no_nfc = 0, force = 0;
    const cli_opt opts[] = {{"model", 1, &model, NULL},     {"tokenizer", 1, &file, NULL},
                            {"text", 1, &text, NULL},       {"jsonl", 1, &jsonl, NULL},
                            {"decode", 1, &decode, NULL},   {"decode-jsonl", 1, &decode_jsonl, NULL},
                            {"export-json", 1, &export_path, NULL},
                            {"no-special", 0, NULL, &no_special}, {"no-nfc", 0, NULL, &no_nfc},
                            {"force", 0, NULL, &force},     {NULL, 0, NULL, NULL}};
    int r = cli_parse(argc, argv, opts, "tokenize", NULL, 0, NULL);
    if (r == 1) {
        fputs(usage_text, stdout);
        return 0;
    }
    if (r) return r;
    if (!!model + !!file != 1) return cli_usage_error("tokenize", "give exactly one of --model or --tokenizer");
    if (!!text + !!jsonl + !!decode + !!decode_jsonl + !!export_path != 1)
        return cli_usage_error("tokenize",
                               "give exactly one of --text, --jsonl, --decode, --decode-jsonl or --export-json");
    if (export_path && strcmp(export_path, "-") != 0) { /* never over an input, nor over a file not asked to go */
        const char *inputs[] = {model, file}, *outputs[] = {export_path};
        if (td_paths_check(inputs, 2, outputs, 1) != TD_OK)
            return cli_error("tokenize", "cannot write the tokenizer.json: %s", td_last_error());
        if (!force && cli_is_file(export_path))
            return cli_error("tokenize", "--export-json %s exists: --force replaces it", export_path);
    }
    /* a GGUF file carries its tokenizer in its metadata; a model directory in tokenizer.json */
    int gguf = model ? !cli_is_dir(model) : cli_is_gguf(file);
    if (no_nfc && !gguf)
        return cli_usage_error("tokenize", "--no-nfc applies to a GGUF file (a tokenizer.json names its own normalizer)");
    char path[4096];
    td_tokenizer *tok = NULL;
    td_status st;
    if (gguf) st = td_tokenizer_load_gguf(model ? model : file, no_nfc ? TD_TOKENIZER_NO_NFC : 0, &tok);
    else {
        if (model) snprintf(path, sizeof path, "%s/tokenizer.json", model);
        st = td_tokenizer_load(model ? path : file, &tok);
    }
    if (st != TD_OK) return cli_fail("tokenize", st);
    unsigned flags = no_special ? 0 : TD_TOKENIZE_PARSE_SPECIAL;
    int rc = 0;
    if (text) rc = tokenize_one(tok, text, strlen(text), flags, "--text");
    else if (jsonl) rc = tokenize_jsonl(tok, jsonl, flags);
    else if (decode_jsonl) rc = decode_each_line(tok, decode_jsonl);
    else if (export_path) rc = export_json(tok, export_path);
    else {
        int32_t *ids;
        size_t n;
        if (cli_ids(decode, &ids, &n)) rc = cli_usage_error("tokenize", "--decode: expected ids like 1,2,3");
        else {
            rc = print_decoded(tok, ids, n, "--decode");
            free(ids);
        }
    }
    td_tokenizer_free(tok);
    return rc;
}
