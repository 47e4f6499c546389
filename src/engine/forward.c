/* The forward pass on the CPU: the model's architecture description (model/arch.h, one arch_*.c per architecture)
 * executed step by step, as transformers computes it, in fp32:
 *   x = embed[token] (x sqrt(hidden) where the architecture scales it)           [T, d]
 *   for each layer: the steps of its kind (norms, products, RoPE, attention or Gated DeltaNet, the MLP, residuals;
 *                   arch_*.c lists them top to bottom); after the last layer's mixer only the rows of the tokens
 *                   that want an output go on (no other hidden state is read)
 *   logits = head(RMSNorm_final(x))      only for the tokens that want an output, and only the head's rows that
 *                                        td_ctx_set_output_rows asked for
 * How the steps run (each output element computed by one fixed sequence of operations, whatever the batch):
 *   - steps that work row by row and follow each other (norms, RoPE, caching K and V, gates, residuals) run as one
 *     pass over the rows, each row taking them in order: the same arithmetic as one pass each, fewer passes;
 *   - consecutive products of one input run as one pass of the pool over it (td_eng_matmuls), the input quantised
 *     once where the weights take quantised activations; a bias is added after its product;
 *   - attention and the DeltaNet split their own way (ops.c, deltanet.c). */
#include "engine/engine.h"
#include "model/arch.h"
#include "util/error.h"

static void embed_row(td_ctx *ctx, int64_t t, const void *arg, int thread) {
    (void)arg, (void)thread;
    const td_model *m = ctx->model;
    float *x = ctx->act.x + t * m->cfg.n_embd;
    td_row_to_f32(x, &m->embed, ctx->pass.tok_id[t]);
    if (m->cfg.embed_scale != 0.0f) /* Gemma: the row times sqrt(hidden_size), as fp32 */
        for (int64_t i = 0; i < m->cfg.n_embd; i++) x[i] *= m->cfg.embed_scale;
    ctx->pass.row_bad[t] = !td_eng_row_finite(x, m->cfg.n_embd);
}

static void final_norm_row(td_ctx *ctx, int64_t i, const void *arg, int thread) {
    (void)arg, (void)thread;
    const td_model *m = ctx->model;
    int64_t d = m->cfg.n_embd;
    ctx->k->rmsnorm(ctx->act.out_x + i * d, ctx->act.x + i * d, m->final_norm, d, m->cfg.rms_eps,
                    m->cfg.zero_centred_norms);
}

td_status td_eng_nonfinite(td_ctx *ctx, int32_t layer, const char *block, int32_t t) {
    const td_pass *ps = &ctx->pass;
    ctx->fault = (td_fault){1, layer, block, ps->tok_seq[t], ps->tok_pos[t]};
    if (layer < 0)
        return td_fail(TD_ERR_NONFINITE, "the input embedding of token %d (position %d of sequence %d) is not finite",
                       ps->tok_id[t], ps->tok_pos[t], ps->tok_seq[t]);
    if (layer == ctx->model->cfg.n_layer)
        return td_fail(TD_ERR_NONFINITE,
                       "the final norm and output head gave NaN or infinity at position %d of sequence %d: a weight "
                       "of the head or the final norm holds one, or the logits overflowed",
                       ps->tok_pos[t], ps->tok_seq[t]);
    return td_fail(TD_ERR_NONFINITE,
                   "layer %d (%s) gave NaN or infinity at position %d of sequence %d: a weight or adapter of that "
                   "layer holds one, or the activations overflowed",
                   layer, block, ps->tok_pos[t], ps->tok_seq[t]);
}

/* TD_ERR_NONFINITE when a row of the residual stream went NaN or infinite in the step just run (`layer`, `block`);
 * rows are tokens, or the output tokens once the last mixer has run. */
static td_status check_rows(td_ctx *ctx, int32_t layer, const char *block) {
    const td_pass *ps = &ctx->pass;
    for (int32_t r = 0; r < ps->n_rows; r++)
        if (ps->row_bad[r]) return td_eng_nonfinite(ctx, layer, block, ps->n_rows == ps->n_tokens ? r : ps->out_tok[r]);
    return TD_OK;
}

/* The products of steps[0..): those that follow each other and read the same buffer, up to TD_ENG_MAX_PRODUCTS;
 * returns how many steps they were. */
static int run_products(td_ctx *ctx, const td_layer *ly, const td_step *s, int n) {
    td_eng_product p[TD_ENG_MAX_PRODUCTS];
    int k = 0, bias = 0;
    for (; k < n && k < TD_ENG_MAX_PRODUCTS && s[k].op == TD_OP_MATMUL && s[k].src == s[0].src; k++) {
        const td_mat *w = &ly->w[s[k].w];
        p[k] = (td_eng_product){w, w->rows, td_eng_buf(ctx, (td_buf)s[k].dst), td_eng_buf_width(ctx, (td_buf)s[k].dst)};
        bias |= s[k].bias >= 0 && ly->v[s[k].bias];
    }
    td_buf src = (td_buf)s[0].src;
    td_eng_matmuls(ctx, td_eng_buf(ctx, src), ctx->pass.n_rows, td_eng_buf_width(ctx, src), p, k);
    if (bias) td_eng_add_biases(ctx, ly, s, k);
    return k;
}

/* Runs one layer's steps; il is its index. */
static td_status run_layer(td_ctx *ctx, int il, const td_layer *ly) {
    const td_config *c = &ctx->model->cfg;
    const td_layer_steps *ls = td_arch_layer_steps(c, il);
    const int last = il == c->n_layer - 1;
    for (int i = 0; i < ls->n;) {
        const td_step *s = &ls->steps[i];
        switch ((td_op)s->op) {
        case TD_OP_MATMUL: i += run_products(ctx, ly, s, ls->n - i); break;
        case TD_OP_ATTENTION:
            td_eng_attention(ctx, il, ctx->act.q, td_eng_buf_width(ctx, TD_B_Q), td_eng_q_head_stride(ctx));
            i++;
            break;
        case TD_OP_DELTANET:
            td_eng_deltanet(ctx, il, ly);
            i++;
            break;
        case TD_OP_KEEP_OUTPUTS:
            if (last) td_eng_keep_outputs(ctx);
            i++;
            break;
        default: { /* row steps, as many as follow each other (KEEP_OUTPUTS only parts them in the last layer) */
            int n = 0;
            const char *block = NULL;
            while (i + n < ls->n && td_eng_row_step(&ls->steps[i + n], last)) {
                if (ls->steps[i + n].op == TD_OP_RESIDUAL) block = ls->steps[i + n].block;
                n++;
            }
            td_eng_row_steps(ctx, il, ly, s, n);
            i += n;
            if (block) {
                td_status st = check_rows(ctx, il, block);
                if (st != TD_OK) return st;
            }
        }
        }
    }
    return TD_OK;
}

td_status td_forward(td_ctx *ctx) {
    const td_model *m = ctx->model;
    const int64_t d = m->cfg.n_embd;
    td_status st;

    td_eng_for(ctx, ctx->pass.n_rows, embed_row, NULL);                          /* x [T, d] */
    if ((st = check_rows(ctx, -1, "embedding")) != TD_OK) return st;
    for (int il = 0; il < m->cfg.n_layer; il++)                                  /* x = layer(x) */
        if ((st = run_layer(ctx, il, &m->layers[il])) != TD_OK) return st;
    if (ctx->pass.n_out == 0) return TD_OK;
    td_eng_for(ctx, ctx->pass.n_out, final_norm_row, NULL);                      /* out_x [n_out, d] */
    int64_t n_rows = ctx->head_rows ? ctx->n_head_rows : m->head.rows;           /* K letters or the vocabulary */
    td_eng_matmul(ctx, &m->head, ctx->head_rows, n_rows, ctx->act.out_x, ctx->pass.n_out, d, ctx->act.out, n_rows);
    ctx->head_macs += (int64_t)ctx->pass.n_out * n_rows * d;                    /* out [n_out, n_rows] */
    for (int32_t i = 0; i < ctx->pass.n_out; i++) /* the final norm and the head's own weights */
        if (!td_eng_row_finite(ctx->act.out + i * n_rows, n_rows))
            return td_eng_nonfinite(ctx, m->cfg.n_layer, "output head", ctx->pass.out_tok[i]);
    return TD_OK;
}
