/* typedecide export: a GGUF file (llama.cpp's qwen3 or qwen35 layout) at a quantisation tier, optionally with the head
 * pruned to the option letters. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"

static const char usage_text[] =
    "usage: typedecide export --model M --quant f32|f16|bf16|q8_0|q4_0 [--embed-quant TYPE] [--prune-head ABCD]\n"
    "                         [--name NAME] -o FILE.gguf\n"
    "\n"
    "Writes a GGUF v3 file with llama.cpp's qwen3 (Qwen3) or qwen35 (Qwen3.5) metadata, tensor names and tokenizer,\n"
    "as llama.cpp's own converter writes them, so that llama.cpp loads an unpruned export. Weight matrices are\n"
    "converted to --quant (Q8_0: fp16 scale + 32 int8; Q4_0: fp16 scale + 16 bytes of nibbles), norms stay F32.\n"
    "\n"
    "  --model M           Hugging Face model directory or GGUF file\n"
    "  --quant TYPE        tier of the weight matrices (default f16)\n"
    "  --embed-quant TYPE  tier of the input embedding (default: as --quant)\n"
    "  --prune-head ABCD   keep only these letters' rows of the output head (probed after \"Answer:\" as decide\n"
    "                      does), in this order; a tied head is untied (the input embedding keeps every row).\n"
    "                      The slot map goes into the GGUF metadata and into slot_map.json beside the file; the\n"
    "                      model then decides but cannot generate. Quantisation happens after pruning.\n"
    "  --name NAME         general.name (default: the model directory's name)\n"
    "  -o FILE             output file: written beside itself and renamed into place when whole, so a failed\n"
    "                      export leaves no partial file and whatever was at FILE before stays; an existing FILE (or\n"
    "                      slot_map.json) is replaced only with --force; a directory or device is refused\n"
    "  --force             replace an existing -o FILE (and slot_map.json)\n"
    "Caps: the model's config.json and tokenizer.json 256 MiB each.\n";

int cmd_export(int argc, char **argv) {
    const char *model_dir = NULL, *quant = "f16", *embed = NULL, *prune = NULL, *name = NULL, *out = NULL;
    int force = 0;
    const cli_opt opts[] = {{"model", 1, &model_dir, NULL},  {"quant", 1, &quant, NULL},   {"embed-quant", 1, &embed, NULL},
                            {"prune-head", 1, &prune, NULL}, {"name", 1, &name, NULL},     {"o", 1, &out, NULL},
                            {"out", 1, &out, NULL},          {"force", 0, NULL, &force},   {NULL, 0, NULL, NULL}};
    int r = cli_parse(argc, argv, opts, "export", NULL, 0, NULL);
    if (r == 1) {
        fputs(usage_text, stdout);
        return 0;
    }
    if (r) return r;
    if (!model_dir || !out) return cli_usage_error("export", "--model and -o are required");
    if (strcmp(out, "-") == 0) return cli_usage_error("export", "-o -: a GGUF file goes to a file");
    char slot_path[4096];
    const char *slash = strrchr(out, '/');
    snprintf(slot_path, sizeof slot_path, "%.*sslot_map.json", slash ? (int)(slash - out + 1) : 0, out);
    const char *inputs[] = {model_dir}, *outputs[] = {out, prune ? slot_path : NULL};
    if (cli_check_paths("export", inputs, 1, outputs, 2)) return 1;
    for (int i = 0; i < 2 && !force; i++) /* a model is not replaced unless asked */
        if (outputs[i] && cli_is_file(outputs[i]))
            return cli_error("export", "%s exists: --force replaces it", outputs[i]);
    td_model *m;
    td_status st = cli_load_model(model_dir, 1, 1, NULL, &m);
    if (st != TD_OK) return cli_fail("export", st);
    td_export_params p = td_export_default_params();
    p.quant = quant;
    p.embed_quant = embed;
    p.prune_letters = prune;
    p.name = name;
    char *smap = NULL;
    double t0 = cli_now();
    st = td_model_export_gguf(m, &p, out, &smap);
    int rc = 0;
    if (st != TD_OK) rc = cli_fail("export", st);
    else {
        if (smap) { /* slot_map.json beside the GGUF */
            const char *path = slot_path;
            size_t sl = strlen(smap);
            char *text = malloc(sl + 2);
            if (text) memcpy(text, smap, sl), memcpy(text + sl, "\n", 2);
            if (!text) rc = cli_error("export", "out of memory");
            else if (td_file_write(path, text, sl + 1, 0) != TD_OK) rc = cli_fail_msg("export");
            else fprintf(stderr, "typedecide export: slot map %s -> %s\n", smap, path);
            free(text);
        }
        if (rc == 0) fprintf(stderr, "typedecide export: wrote %s (%s%s) in %.1f s\n", out, quant, prune ? ", head pruned" : "", cli_now() - t0);
    }
    td_free(smap);
    td_model_free(m);
    return rc;
}
