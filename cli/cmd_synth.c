/* typedecide synth: a random-weight checkpoint with the exact shapes of a real architecture. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"

static const char usage_text[] =
    "usage: typedecide synth (--preset NAME | --config FILE) --out DIR [--tokenizer FILE] [--seed N]\n"
    "                        [--dtype bf16|f16|f32]\n"
    "\n"
    "Writes DIR/config.json, DIR/model.safetensors (random weights in the real tensor layout) and\n"
    "DIR/generation_config.json; with --tokenizer, also a copy of that tokenizer.json (and the\n"
    "tokenizer_config.json beside it). For benchmarks and tests: the weights mean nothing.\n"
    "\n"
    "  --preset NAME    one of: %s\n"
    "  --config FILE    any Hugging Face config.json of a supported architecture\n"
    "  --out DIR        output directory (created if missing)\n"
    "  --tokenizer FILE tokenizer.json to ship with the model (e.g. the real Qwen3 tokenizer)\n"
    "  --seed N         random seed (default 1)\n"
    "  --dtype T        bf16 (default), f16 or f32\n";

static void progress(void *user, double f) {
    int *last = user;
    int pct = (int)(f * 100.0);
    if (pct / 10 != *last / 10) {
        fprintf(stderr, "\rtypedecide synth: %3d%%", pct);
        if (pct >= 100) fputc('\n', stderr);
        *last = pct;
    }
}

int cmd_synth(int argc, char **argv) {
    const char *preset = NULL, *config = NULL, *out = NULL, *tok = NULL, *seed_s = "1", *dtype_s = "bf16";
    const cli_opt opts[] = {{"preset", 1, &preset, NULL}, {"config", 1, &config, NULL}, {"out", 1, &out, NULL},
                            {"tokenizer", 1, &tok, NULL}, {"seed", 1, &seed_s, NULL},   {"dtype", 1, &dtype_s, NULL},
                            {NULL, 0, NULL, NULL}};
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
    char *text = NULL;
    if (preset) {
        const char *c = td_synth_preset_config(preset);
        if (!c) return cli_usage_error("synth", "unknown preset \"%s\" (known: %s)", preset, td_synth_preset_names());
        text = strdup(c);
    } else {
        if (!(text = cli_read_input("synth", config, CLI_MAX_TEXT, "a config.json can be", NULL))) return 1;
    }
    int last = -10;
    td_synth_params sp = td_synth_default_params();
    sp.tokenizer_json = tok;
    sp.seed = (uint64_t)seed;
    sp.dtype = dtype_s;
    sp.progress = progress;
    sp.progress_user = &last;
    td_status st = td_synth_write(out, text, &sp);
    free(text);
    if (st != TD_OK) return cli_fail("synth", st);
    fprintf(stderr, "typedecide synth: wrote %s\n", out);
    return 0;
}
