/* A tokenizer from a GGUF file's tokenizer.ggml.* metadata, as llama.cpp's converter writes it, whatever the
 * file's architecture and whether or not it holds tensors (llama.cpp ships vocabulary-only GGUF files). The
 * arrays are read once, straight from the mapped file, into the tokenizer builder (tokenizer/build.h): no
 * tokenizer.json is made on the way, so a 152k-token vocabulary loads in a fraction of a second.
 *
 * llama.cpp's token types: 1 NORMAL (a BPE vocabulary entry, in the byte-level alphabet), 3 CONTROL (an added
 * token marked special: <|im_end|>), 4 USER_DEFINED (an added token that is not special: <think>, and the
 * converter's [PADn] fillers of old files), 5 UNUSED (a row of the embedding past the tokenizer's ids: a hole).
 * Byte-level BPE has no UNKNOWN (2) or BYTE (6) tokens. */
#include <stdint.h>
#include <string.h>

#include "model/gguf.h"
#include "model/gguf_names.h"
#include "tokenizer/build.h"
#include "util/alloc.h"
#include "util/error.h"

static int is_int_type(td_gguf_vtype t) {
    return t <= TD_GGUF_I32 || t == TD_GGUF_U64 || t == TD_GGUF_I64;
}

td_status td_gguf_tokenizer(const td_gguf *g, unsigned flags, td_tokenizer **out) {
    const char *path = g->map.path ? g->map.path : "gguf";
    const char *model, *pre;
    uint64_t ml, pl;
    td_status st;
    *out = NULL;
    if (!td_gguf_find(g, "tokenizer.ggml.model"))
        return td_fail(TD_ERR_FORMAT, "%s: no tokenizer.ggml.model: the file carries no tokenizer", path);
    if ((st = td_gguf_get_str(g, "tokenizer.ggml.model", 1, &model, &ml)) != TD_OK) return st;
    int spm = ml == 5 && memcmp(model, "llama", 5) == 0, gemma4 = ml == 6 && memcmp(model, "gemma4", 6) == 0;
    if (!spm && !gemma4 && (ml != 4 || memcmp(model, "gpt2", 4) != 0))
        return td_fail(TD_ERR_UNSUPPORTED, "%s: tokenizer.ggml.model \"%.*s\" is not supported (\"gpt2\": byte-level "
                       "BPE; \"gemma4\" and \"llama\": Gemma's SentencePiece-style BPE)", path, (int)(ml < 64 ? ml : 64),
                       model);
    /* add_bos_token: the BOS that llama.cpp puts before a text (Llama 3), as Hugging Face's post-processor does */
    int add_bos = 0;
    int64_t bos = -1;
    if ((st = td_gguf_get_bool(g, "tokenizer.ggml.add_bos_token", 0, &add_bos)) != TD_OK ||
        (st = td_gguf_get_int(g, "tokenizer.ggml.bos_token_id", 0, &bos)) != TD_OK)
        return st;
    if (add_bos && (bos < 0 || bos >= INT32_MAX))
        return td_fail(TD_ERR_FORMAT, "%s: tokenizer.ggml.add_bos_token is true but tokenizer.ggml.bos_token_id is %s",
                       path, bos < 0 ? "missing" : "out of range");
    if (spm || gemma4) return td_gguf_spm_tokenizer(g, gemma4, add_bos ? (int32_t)bos : -1, out);
    if (!td_gguf_find(g, "tokenizer.ggml.pre"))
        return td_fail(TD_ERR_FORMAT, "%s: no tokenizer.ggml.pre: the pre-tokenizer's name (%s) is needed", path,
                       td_gguf_pre_names());
    if ((st = td_gguf_get_str(g, "tokenizer.ggml.pre", 1, &pre, &pl)) != TD_OK) return st;
    const td_gguf_pre *pt = td_gguf_pre_named(pre, (size_t)pl);
    if (!pt)
        return td_fail(TD_ERR_UNSUPPORTED, "%s: tokenizer.ggml.pre \"%.*s\" is not a pre-tokenizer this library knows "
                       "(%s)", path, (int)(pl < 64 ? pl : 64), pre, td_gguf_pre_names());
    const td_gguf_kv *toks = td_gguf_find(g, "tokenizer.ggml.tokens"), *types = td_gguf_find(g, "tokenizer.ggml.token_type");
    const td_gguf_kv *merges = td_gguf_find(g, "tokenizer.ggml.merges");
    if (!toks) return td_fail(TD_ERR_FORMAT, "%s: missing metadata tokenizer.ggml.tokens (the vocabulary)", path);
    if (toks->type != TD_GGUF_ARRAY || toks->elem_type != TD_GGUF_STRING || toks->n == 0)
        return td_fail(TD_ERR_FORMAT, "%s: tokenizer.ggml.tokens must be a non-empty array of strings", path);
    if (toks->n > TD_MAX_TOKEN_ID)
        return td_fail(TD_ERR_FORMAT, "%s: tokenizer.ggml.tokens has %llu entries, more than %d", path,
                       (unsigned long long)toks->n, TD_MAX_TOKEN_ID);
    if (types && (types->type != TD_GGUF_ARRAY || !is_int_type(types->elem_type) || types->n != toks->n))
        return td_fail(TD_ERR_FORMAT, "%s: tokenizer.ggml.token_type must be an array of integers, one per token (%llu)",
                       path, (unsigned long long)toks->n);
    if (!merges) return td_fail(TD_ERR_FORMAT, "%s: missing metadata tokenizer.ggml.merges (BPE needs its merges)", path);
    if (merges->type != TD_GGUF_ARRAY || merges->elem_type != TD_GGUF_STRING)
        return td_fail(TD_ERR_FORMAT, "%s: tokenizer.ggml.merges must be an array of strings", path);

    size_t n = (size_t)toks->n, n_added = 0;
    for (size_t i = 0; types && i < n; i++) {
        int64_t t = td_gguf_array_int(types, i);
        if (t == 3 || t == 4) n_added++;
        else if (t != 1 && t != 5)
            return td_fail(TD_ERR_UNSUPPORTED, "%s: tokenizer.ggml.token_type[%zu] is %lld; byte-level BPE has only "
                           "NORMAL (1), CONTROL (3), USER_DEFINED (4) and UNUSED (5) tokens", path, i, (long long)t);
    }
    td_bpe_token *vocab = td_malloc(n * sizeof *vocab);
    td_bpe_added *added = td_calloc(n_added ? n_added : 1, sizeof *added);
    td_bpe_merge *mv = td_malloc((merges->n ? merges->n : 1) * sizeof *mv);
    size_t nv = 0, na = 0;
    st = vocab && added && mv ? TD_OK : td_fail_nomem("the vocabulary");
    const uint8_t *it = NULL;
    for (size_t i = 0; st == TD_OK && i < n; i++) {
        const char *s;
        uint64_t l;
        td_gguf_next_str(toks, &it, &s, &l);
        int64_t t = types ? td_gguf_array_int(types, i) : 1;
        if (t == 1) vocab[nv].s = s, vocab[nv].len = (size_t)l, vocab[nv++].id = (int32_t)i;
        else if (t == 3 || t == 4) {
            td_bpe_added *a = &added[na++];
            a->content = s, a->len = (size_t)l, a->id = (int32_t)i, a->special = t == 3;
        }
    }
    it = NULL;
    for (uint64_t i = 0; st == TD_OK && i < merges->n; i++) {
        const char *s;
        uint64_t l;
        td_gguf_next_str(merges, &it, &s, &l);
        if (td_bpe_merge_split(s, (size_t)l, &mv[i]) != 0)
            st = td_fail(TD_ERR_FORMAT, "%s: tokenizer.ggml.merges[%llu] \"%.*s\" is not two tokens separated by one space",
                         path, (unsigned long long)i, (int)(l < 64 ? l : 64), s);
    }
    if (st == TD_OK) {
        td_bpe_parts parts = {path, "tokenizer.ggml.tokens", "tokenizer.ggml.merges", vocab, nv, added, na, mv,
                              (size_t)merges->n};
        td_bpe_options opt = {pt->nfc && !(flags & TD_TOKENIZER_NO_NFC), pt->ignore_merges, add_bos ? (int32_t)bos : -1, 0, -1};
        st = td_tokenizer_build(&parts, &opt, pt->regex, out);
    }
    td_free(vocab);
    td_free(added);
    td_free(mv);
    return st;
}

td_status td_tokenizer_load_gguf(const char *path, unsigned flags, td_tokenizer **out) {
    if (out) *out = NULL;
    if (!path || !out) return td_fail(TD_ERR_INVALID_ARG, "td_tokenizer_load_gguf: NULL argument");
    if (flags & ~(unsigned)TD_TOKENIZER_NO_NFC)
        return td_fail(TD_ERR_INVALID_ARG, "td_tokenizer_load_gguf: unknown flags 0x%x", flags);
    td_gguf g;
    td_status st = td_gguf_open(path, &g);
    if (st != TD_OK) return st;
    st = td_gguf_tokenizer(&g, flags, out);
    td_gguf_close(&g);
    return st;
}
