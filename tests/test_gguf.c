/* The GGUF reader on malformed files: bad magic, unsupported versions, truncated tensor data, offsets past the end,
 * misaligned or overlapping data, unknown tensor types, absurd dimension counts and sizes, absurd counts, bad
 * metadata; each a clear message. Plus a model-level check: a GGUF whose tensor disagrees with its metadata. */
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

    /* a model whose tensor disagrees with its metadata: the fixture GGUF with a broken embedding length */
    size_t len;
    uint8_t *buf = td_test_read(td_test_path("fixtures/gguf/qwen3-tiny-tied-f32.gguf"), &len);
    CHECK(buf != NULL);
    if (buf) {
        uint8_t *hit = NULL;
        const char *key = "qwen3.feed_forward_length";
        for (size_t i = 0; i + strlen(key) < len && !hit; i++)
            if (memcmp(buf + i, key, strlen(key)) == 0) hit = buf + i + strlen(key);
        CHECK(hit != NULL);
        if (hit) {
            hit[4] = 99; /* u32 value after the type: 128 -> 99 */
            char path[] = "/tmp/td_test_gguf_XXXXXX";
            int fd = mkstemp(path);
            FILE *f = fd >= 0 ? fdopen(fd, "wb") : NULL;
            if (f) {
                fwrite(buf, 1, len, f);
                fclose(f);
            }
            td_model *model = NULL;
            CHECK(td_model_load(path, NULL, &model) == TD_ERR_FORMAT);
            CHECKF(strstr(td_last_error(), "blk.0.ffn_gate.weight has shape [128, 64] but the metadata implies [99, 64]"),
                   "%s", td_last_error());
            td_model_free(model);
            remove(path);
        }
        free(buf);
    }
    return td_test_finish("test_gguf");
}
