/* The GGUF reader on malformed files: bad magic, unsupported versions, truncated tensor data, offsets past the end,
 * misaligned or overlapping data, unknown tensor types, absurd dimension counts and sizes, absurd counts, bad
 * metadata; each a clear message. Plus model-level checks: GGUFs (qwen3, and llama.cpp's qwen35 conversion) whose
 * metadata disagrees with the tensors or lacks a key, each refused with a message naming the key or tensor. */
#include <stdlib.h>
#include <string.h>

#include "model/gguf.h"
#include "test_util.h"
#include "typedecide.h"

/* A hand-built GGUF: 1 metadata entry, 1 F32 tensor "t" of 8 values; returns its size. Field offsets noted. */
typedef struct img {
    uint8_t b[512];
    size_t n;
    size_t off_version, off_ndims, off_dim0, off_type, off_offset, off_data;
} img;

static void u32(img *m, uint32_t v) {
    for (int i = 0; i < 4; i++) m->b[m->n++] = (uint8_t)(v >> (8 * i));
}
static void u64(img *m, uint64_t v) {
    for (int i = 0; i < 8; i++) m->b[m->n++] = (uint8_t)(v >> (8 * i));
}
static void str(img *m, const char *s) {
    u64(m, strlen(s));
    memcpy(m->b + m->n, s, strlen(s));
    m->n += strlen(s);
}

static img build(void) {
    img m;
    memset(&m, 0, sizeof m);
    u32(&m, 0x46554747u);
    m.off_version = m.n;
    u32(&m, 3);
    u64(&m, 1); /* tensors */
    u64(&m, 1); /* metadata */
    str(&m, "general.architecture");
    u32(&m, 8);
    str(&m, "qwen3");
    str(&m, "t");
    m.off_ndims = m.n;
    u32(&m, 1);
    m.off_dim0 = m.n;
    u64(&m, 8);
    m.off_type = m.n;
    u32(&m, 0);
    m.off_offset = m.n;
    u64(&m, 0);
    while (m.n % 32) m.b[m.n++] = 0;
    m.off_data = m.n;
    for (int i = 0; i < 8; i++) {
        float f = (float)i;
        memcpy(m.b + m.n, &f, 4);
        m.n += 4;
    }
    return m;
}

static void put32(img *m, size_t at, uint32_t v) {
    for (int i = 0; i < 4; i++) m->b[at + (size_t)i] = (uint8_t)(v >> (8 * i));
}
static void put64(img *m, size_t at, uint64_t v) {
    for (int i = 0; i < 8; i++) m->b[at + (size_t)i] = (uint8_t)(v >> (8 * i));
}

static void expect(const img *m, size_t n, const char *what, const char *needle) {
    td_gguf g;
    td_status st = td_gguf_parse(m->b, n, "test.gguf", &g);
    CHECKF(st != TD_OK, "%s: accepted", what);
    if (st == TD_OK) {
        td_gguf_close(&g);
        return;
    }
    CHECKF(strstr(td_last_error(), needle) != NULL, "%s: \"%s\" lacks \"%s\"", what, td_last_error(), needle);
}

/* Loads a copy of a fixture GGUF with one metadata entry changed: the byte `at` bytes past the end of `key` set to
 * v (at = 4: the low byte of a u32 value, after its type), or with at < 0 the key's last character replaced by v
 * (the key is then missing). Expects TD_ERR_FORMAT with a message containing needle. */
static void expect_patched(const char *fixture, const char *key, int at, uint8_t v, const char *needle) {
    size_t len, kl = strlen(key);
    uint8_t *buf = td_test_read(td_test_path(fixture), &len);
    CHECKF(buf != NULL, "%s missing", fixture);
    if (!buf) return;
    uint8_t *hit = NULL;
    for (size_t i = 0; i + kl + 8 < len && !hit; i++)
        if (memcmp(buf + i, key, kl) == 0) hit = buf + i + kl;
    CHECKF(hit != NULL, "%s: no key %s", fixture, key);
    char path[] = "/tmp/td_test_gguf_XXXXXX";
    int fd = hit ? mkstemp(path) : -1;
    FILE *f = fd >= 0 ? fdopen(fd, "wb") : NULL;
    if (f) {
        if (at < 0) hit[-1] = v;
        else hit[at] = v;
        fwrite(buf, 1, len, f);
        fclose(f);
        td_model *model = NULL;
        td_status st = td_model_load(path, NULL, &model);
        CHECKF(st == TD_ERR_FORMAT, "%s with %s changed: status %d", fixture, key, (int)st);
        CHECKF(strstr(td_last_error(), needle), "%s with %s changed: \"%s\" lacks \"%s\"", fixture, key, td_last_error(),
               needle);
        td_model_free(model);
        remove(path);
    }
    free(buf);
}

int main(void) {
    img good = build(), m;
    td_gguf g;
    CHECKF(td_gguf_parse(good.b, good.n, "test.gguf", &g) == TD_OK, "the hand-built file: %s", td_last_error());
    if (g.n_tensors == 1) {
        CHECK(g.tensors[0].ne[0] == 8 && g.tensors[0].dtype == TD_DTYPE_F32);
        float f;
        memcpy(&f, g.tensors[0].data + 28, 4);
        CHECK(f == 7.0f);
    }
    td_gguf_close(&g);

    m = good;
    m.b[0] = 'X';
    expect(&m, m.n, "bad magic", "not a GGUF file (bad magic)");
    m = good;
    put32(&m, m.off_version, 1);
    expect(&m, m.n, "version 1", "GGUF version 1 is not supported");
    m = good;
    put32(&m, m.off_version, 4);
    expect(&m, m.n, "version 4", "GGUF version 4 is not supported");
    expect(&good, good.n - 5, "truncated tensor data", "tensor t: data (offset 0, 32 bytes) runs past the end");
    expect(&good, 30, "truncated metadata", "truncated");
    m = good;
    put64(&m, m.off_offset, 64);
    expect(&m, m.n, "offset past the end", "runs past the end of the file");
    m = good;
    put64(&m, m.off_offset, 4);
    expect(&m, m.n, "misaligned offset", "offset 4 is not aligned to 32 bytes");
    m = good;
    put32(&m, m.off_type, 99);
    expect(&m, m.n, "unknown type", "tensor t: unknown ggml type 99");
    m = good;
    put32(&m, m.off_type, 8); /* Q8_0 needs rows of 32 */
    expect(&m, m.n, "row not a block multiple", "row length 8 is not a multiple of the Q8_0 block");
    m = good;
    put32(&m, m.off_ndims, 7);
    expect(&m, m.n, "absurd dimension count", "7 dimensions (1 to 4 allowed)");
    m = good;
    put64(&m, m.off_dim0, 1ull << 62);
    expect(&m, m.n, "absurd dimension", "absurd dimension");
    m = good;
    put64(&m, 8, 1ull << 40); /* tensor count */
    expect(&m, m.n, "absurd tensor count", "absurd counts");
    m = good;
    put64(&m, 24, 1ull << 60); /* the key's length */
    expect(&m, m.n, "absurd string length", "absurd");

    /* models whose metadata is broken: one entry of a fixture changed */
    expect_patched("fixtures/gguf/qwen3-tiny-tied-f32.gguf", "qwen3.feed_forward_length", 4, 99,
                   "blk.0.ffn_gate.weight has shape [128, 64] but the metadata implies [99, 64]");
    const char *q35 = "fixtures/gguf/qwen35-tiny-vl-bf16.gguf"; /* 8 layers + 1 MTP block, interval 4, Hk = Hv = 2 */
    expect_patched(q35, "qwen35.ssm.group_count", -1, 'x', "missing metadata qwen35.ssm.group_count");
    expect_patched(q35, "qwen35.attention.layer_norm_rms_epsilon", -1, 'x',
                   "missing metadata qwen35.attention.layer_norm_rms_epsilon");
    expect_patched(q35, "qwen35.block_count", 4, 10,
                   "metadata qwen35.block_count is 10 but the tensors are those of 9 blocks (blk.0 to blk.8)");
    expect_patched(q35, "qwen35.block_count", 4, 7, "metadata qwen35.block_count is 7 but the tensors are those of 9 blocks");
    expect_patched(q35, "qwen35.nextn_predict_layers", 4, 9, "qwen35.nextn_predict_layers 9 leaves no text layers");
    expect_patched(q35, "qwen35.nextn_predict_layers", 4, 0,
                   "missing tensor blk.8.attn_norm.weight (text layer 8 of 9 = qwen35.block_count - nextn_predict_layers");
    expect_patched(q35, "qwen35.full_attention_interval", 4, 2,
                   "missing tensor blk.1.attn_q.weight (text layer 1 of 8 = qwen35.block_count - nextn_predict_layers; full "
                   "attention by qwen35.full_attention_interval");
    expect_patched(q35, "qwen35.ssm.time_step_rank", 4, 3,
                   "qwen35.ssm.inner_size 32 is not a multiple of qwen35.ssm.time_step_rank 3");
    expect_patched(q35, "qwen35.ssm.state_size", 4, 8, "tensor blk.0.attn_qkv.weight has shape [96, 64] but the metadata implies [64, 64]");
    expect_patched(q35, "qwen35.ssm.conv_kernel", 4, 0, "metadata qwen35.ssm.conv_kernel must be a positive count (is 0)");
    expect_patched(q35, "qwen35.rope.dimension_count", 4, 7, "qwen35.rope.dimension_count 7 must be even");
    return td_test_finish("test_gguf");
}
