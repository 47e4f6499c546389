/* typedecide logits: float32 logits of every position of an id sequence, for parity tests. */
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"
#include "commands.h"

static const char usage_text[] =
    "usage: typedecide logits --model DIR --ids 1,2,3 --out FILE [--adapter DIR] [--threads N] [--device cpu|cuda]\n"
    "\n"
    "Runs the ids through the model (exact fp32 arithmetic unless --precision bf16) and\n"
    "writes the logits of EVERY position to FILE as little-endian float32, shape [n_ids, vocab_size], row-major.\n"
    "Needs no tokenizer files.\n"
    "\n"
    "  --model DIR   Hugging Face model directory\n"
    "  --ids LIST    comma-separated token ids\n"
    "  --out FILE    output file: written beside itself and renamed when whole (a failed write leaves what was\n"
    "                there); never an input or a file of the model; a directory or device is refused\n"
    "  --adapter DIR PEFT LoRA adapter (adapter_config.json, adapter_model.safetensors), merged at load\n"
    "  --threads N   worker threads (default: all cores); results do not depend on it\n"
    "  --ctx N       allow up to N positions (default: the model's trained context; beyond it, a warning)\n"
    "  --device cpu|cuda  where to compute (default cpu; cuda: a build with -DTD_CUDA=ON and an NVIDIA GPU)\n"
    CLI_PRECISION_HELP;

int cmd_logits(int argc, char **argv) {
    const char *model_dir = NULL, *ids_s = NULL, *out = NULL, *threads_s = NULL, *adapter = NULL, *ctx_s = NULL,
               *device_s = NULL, *precision_s = NULL;
    const cli_opt opts[] = {{"model", 1, &model_dir, NULL},   {"ids", 1, &ids_s, NULL},
                            {"out", 1, &out, NULL},           {"adapter", 1, &adapter, NULL},
                            {"threads", 1, &threads_s, NULL}, {"ctx", 1, &ctx_s, NULL},
                            {"device", 1, &device_s, NULL},   {"precision", 1, &precision_s, NULL},
                            {NULL, 0, NULL, NULL}};
    int r = cli_parse(argc, argv, opts, "logits", NULL, 0, NULL);
    if (r == 1) {
        fputs(usage_text, stdout);
        return 0;
    }
    if (r) return r;
    if (!model_dir || !ids_s || !out) return cli_usage_error("logits", "--model, --ids and --out are required");
    long long threads = cli_default_threads();
    if (threads_s && cli_int(threads_s, 1, 1024, &threads))
        return cli_usage_error("logits", "--threads must be an integer in 1..1024");
    long long ctx_max = 0;
    if (ctx_s && cli_int(ctx_s, 1, 1 << 24, &ctx_max)) return cli_usage_error("logits", "--ctx must be in 1..16777216");
    const char *inputs[] = {model_dir, adapter};
    if (cli_refuse_overwrite("logits", out, inputs, 2)) return 1;
    int32_t *ids;
    size_t n;
    if (cli_ids(ids_s, &ids, &n)) return cli_usage_error("logits", "--ids: expected comma-separated integers");
    if (n == 0) {
        free(ids);
        return cli_usage_error("logits", "--ids is empty");
    }
    int32_t device = TD_DEVICE_CPU, precision = 0;
    if ((r = cli_device("logits", device_s, precision_s, &device, &precision, NULL, 0)) != 0) {
        free(ids);
        return r;
    }
    td_model *m = NULL;
    td_ctx *ctx = NULL;
    td_batch *b = NULL;
    td_outfile *f = NULL;
    int rc = 0;
    td_status st = cli_load_model(model_dir, 0, 0, adapter, &m);
    if (st != TD_OK) {
        rc = cli_fail("logits", st);
        goto done;
    }
    if (!td_model_can_generate(m)) {
        rc = cli_error("logits", "%s: the output head was pruned to the option letters (slot map %s): there are no "
                                 "full-vocabulary logits",
                       model_dir, td_model_slot_map(m));
        goto done;
    }
    int32_t V = td_model_n_vocab(m);
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= V) {
            rc = cli_error("logits", "--ids: id %d (position %zu) is outside the vocabulary 0..%d", ids[i], i, V - 1);
            goto done;
        }
    if ((rc = cli_check_context("logits", m, (long long)n, ctx_max, "--ids")) != 0) goto done;
    td_ctx_params cp = td_ctx_default_params();
    cp.n_ctx = (int32_t)n;
    cp.n_batch = n < 64 ? (int32_t)n : 64;
    cp.n_outputs_max = cp.n_batch;
    cp.n_threads = (int32_t)threads;
    cp.device = device;
    cp.precision = precision;
    if ((st = td_ctx_new(m, &cp, &ctx)) != TD_OK || (st = td_batch_new(cp.n_batch, &b)) != TD_OK) {
        rc = cli_fail("logits", st);
        goto done;
    }
    if ((st = td_outfile_open(out, 0, &f)) != TD_OK) { /* written beside --out, renamed when whole */
        rc = cli_fail_msg("logits");
        goto done;
    }
    for (size_t i = 0; i < n; i += (size_t)cp.n_batch) {
        td_batch_clear(b);
        size_t e = i + (size_t)cp.n_batch < n ? i + (size_t)cp.n_batch : n;
        for (size_t j = i; j < e; j++) td_batch_add(b, ids[j], 0, (int32_t)j, 1);
        if ((st = td_ctx_decode(ctx, b)) != TD_OK) {
            rc = cli_fail("logits", st);
            goto done;
        }
        for (int32_t o = 0; o < td_ctx_n_outputs(ctx); o++)
            if (td_outfile_write(f, td_ctx_output(ctx, o), sizeof(float) * (size_t)V) != TD_OK) {
                rc = cli_fail_msg("logits");
                goto done;
            }
    }
    st = td_outfile_commit(f);
    f = NULL;
    if (st != TD_OK) rc = cli_fail_msg("logits");
done:
    td_outfile_abort(f);
    td_batch_free(b);
    td_ctx_free(ctx);
    td_model_free(m);
    free(ids);
    return rc;
}
