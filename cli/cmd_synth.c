/* typedecide synth: a random-weight checkpoint with the exact shapes of a real architecture. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "commands.h"

static const char usage_text[] =
    "usage: typedecide synth (--preset NAME | --config FILE) --out DIR [--tokenizer FILE] [--seed N]\n"
    "                        [--dtype bf16|f16|f32] [--force]\n"
    "\n"
    "Writes DIR/config.json, DIR/model.safetensors (random weights in the real tensor layout) and\n"
    "DIR/generation_config.json; with --tokenizer, also a copy of that tokenizer.json (and the\n"
    "tokenizer_config.json beside it). For benchmarks and tests: the weights mean nothing.\n"
    "\n"
    "  --preset NAME    one of: %s\n"
    "  --config FILE    any Hugging Face config.json of a supported architecture\n"
    "  --out DIR        output directory (created if missing); a directory that already holds files is refused\n"
    "                   unless --force, and then only the files synth writes are replaced, each whole: the model\n"
    "                   is first written into a temporary directory inside DIR and moved into place at the end\n"
    "  --force          write into a directory that is not empty (replacing a model there)\n"
    "  --tokenizer FILE tokenizer.json to ship with the model (e.g. the real Qwen3 tokenizer)\n"
    "  --seed N         random seed (default 1)\n"
    "  --dtype T        bf16 (default), f16 or f32\n"
    "Caps: --config 1 MiB; --tokenizer 256 MiB.\n";

static void progress(void *user, double f) {
    int *last = user;
    int pct = (int)(f * 100.0);
    if (pct / 10 != *last / 10) {
        fprintf(stderr, "\rtypedecide synth: %3d%%", pct);
        if (pct >= 100) fputc('\n', stderr);
        *last = pct;
    }
}

/* 1 when the directory holds anything but "." and "..". */
static int dir_has_files(const char *dir) {
    DIR *d = opendir(dir);
    struct dirent *e;
    int any = 0;
    while (d && !any && (e = readdir(d))) any = strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    if (d) closedir(d);
    return any;
}

static char *path_join(const char *dir, const char *name) {
    char *p = malloc(strlen(dir) + strlen(name) + 2);
    if (p) sprintf(p, "%s/%s", dir, name);
    return p;
}

/* Moves every file of the temporary directory into out (rename: each file appears whole), then removes the
 * temporary directory; on failure, removes what is left in it. Returns 0, or 1 after printing why. */
static int move_into(const char *tmp, const char *out, int ok) {
    DIR *d = opendir(tmp);
    struct dirent *e;
    int rc = d ? 0 : cli_error("synth", "%s: %s", tmp, strerror(errno));
    while (d && (e = readdir(d))) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        char *from = path_join(tmp, e->d_name), *to = path_join(out, e->d_name);
        if (!from || !to) rc = cli_error("synth", "out of memory");
        else if (ok && !rc && rename(from, to) != 0) rc = cli_error("synth", "%s: cannot move into place: %s", to, strerror(errno));
        if (from && (!ok || rc)) unlink(from); /* ours: written in the temporary directory */
        free(from), free(to);
    }
    if (d) closedir(d);
    rmdir(tmp);
    return rc;
}

int cmd_synth(int argc, char **argv) {
    const char *preset = NULL, *config = NULL, *out = NULL, *tok = NULL, *seed_s = "1", *dtype_s = "bf16";
    int force = 0;
    const cli_opt opts[] = {{"preset", 1, &preset, NULL}, {"config", 1, &config, NULL}, {"out", 1, &out, NULL},
                            {"tokenizer", 1, &tok, NULL}, {"seed", 1, &seed_s, NULL},   {"dtype", 1, &dtype_s, NULL},
                            {"force", 0, NULL, &force},   {NULL, 0, NULL, NULL}};
    int r = cli_parse(argc, argv, opts, "synth", NULL, 0, NULL);
    if (r == 1) {
        printf(usage_text, td_synth_preset_names());
        return 0;
    }
    if (r) return r;
    if (!!preset + !!config != 1) return cli_usage_error("synth", "give exactly one of --preset or --config");
    if (!out) return cli_usage_error("synth", "--out DIR is required");
    long long seed;
    if (cli_int(seed_s, 0, INT64_MAX, &seed)) return cli_usage_error("synth", "--seed must be a non-negative integer");
    if (strcmp(dtype_s, "bf16") != 0 && strcmp(dtype_s, "f16") != 0 && strcmp(dtype_s, "f32") != 0)
        return cli_usage_error("synth", "--dtype must be bf16, f16 or f32");
    struct stat sb;
    int exists = stat(out, &sb) == 0;
    if (exists && !S_ISDIR(sb.st_mode)) return cli_error("synth", "--out %s: exists and is not a directory", out);
    if (exists && !force && dir_has_files(out))
        return cli_error("synth", "--out %s: the directory is not empty (a model there would be replaced): --force "
                                  "writes into it", out);
    /* the files synth writes may not be its inputs (a tokenizer inside DIR, say) */
    char tc[4096];
    const char *slash = tok ? strrchr(tok, '/') : NULL;
    snprintf(tc, sizeof tc, "%.*stokenizer_config.json", slash ? (int)(slash - tok + 1) : 0, tok ? tok : "");
    const char *names[] = {"config.json", "model.safetensors", "generation_config.json", "tokenizer.json",
                           "tokenizer_config.json"};
    char *targets[5] = {0};
    const char *inputs[] = {config, tok, tok ? tc : NULL}, *outputs[5];
    int rc = 0;
    for (int i = 0; i < 5; i++) {
        outputs[i] = targets[i] = path_join(out, names[i]);
        if (!targets[i]) rc = cli_error("synth", "out of memory");
    }
    if (!rc && exists) rc = cli_check_paths("synth", inputs, 3, outputs, 5);
    for (int i = 0; i < 5; i++) free(targets[i]);
    if (rc) return rc;
    char *text = NULL;
    if (preset) {
        const char *c = td_synth_preset_config(preset);
        if (!c) return cli_usage_error("synth", "unknown preset \"%s\" (known: %s)", preset, td_synth_preset_names());
        text = strdup(c);
    } else {
        if (!(text = cli_read_input("synth", config, CLI_MAX_TEXT, "a config.json can be", NULL))) return 1;
    }
    if (!text) return cli_error("synth", "out of memory");
    int created = 0;
    if (!exists) {
        if (mkdir(out, 0755) != 0) {
            free(text);
            return cli_error("synth", "--out %s: cannot create the directory: %s", out, strerror(errno));
        }
        created = 1;
    }
    char *tmp = path_join(out, ".synth.XXXXXX");
    if (!tmp || !mkdtemp(tmp)) {
        rc = cli_error("synth", "--out %s: cannot create a temporary directory in it: %s", out, strerror(errno));
        free(tmp), free(text);
        if (created) rmdir(out);
        return rc;
    }
    int last = -10;
    td_synth_params sp = td_synth_default_params();
    sp.tokenizer_json = tok;
    sp.seed = (uint64_t)seed;
    sp.dtype = dtype_s;
    sp.progress = progress;
    sp.progress_user = &last;
    td_status st = td_synth_write(tmp, text, &sp);
    free(text);
    if (st != TD_OK) rc = cli_fail("synth", st);
    rc = move_into(tmp, out, st == TD_OK) || rc;
    free(tmp);
    if (rc) {
        if (created) rmdir(out); /* ours, and empty again */
        return rc;
    }
    fprintf(stderr, "typedecide synth: wrote %s\n", out);
    return 0;
}
