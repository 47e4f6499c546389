/* libFuzzer target: the tokenizer.json loader (td_tokenizer_load_bytes), then encoding and decoding a fixed text
 * with whatever tokenizer it accepted. */
#include <stdint.h>
#include <string.h>

#include "typedecide.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    td_tokenizer *tok = NULL;
    if (td_tokenizer_load_bytes((const char *)data, size, "fuzz.json", &tok) != TD_OK) {
        if (!td_last_error()[0]) __builtin_trap();
        return 0;
    }
    static const char text[] = "Answer: A. <|im_start|>caf\xc3\xa9  12,5 \xe0\xb8\x81\n\n";
    int32_t *ids = NULL;
    size_t n = 0;
    if (td_tokenize(tok, text, sizeof text - 1, TD_TOKENIZE_PARSE_SPECIAL, &ids, &n) == TD_OK) {
        char *back = NULL;
        size_t len = 0;
        if (td_detokenize(tok, ids, n, &back, &len) == TD_OK && !back) __builtin_trap();
        td_free(back);
    }
    td_free(ids);
    td_tokenizer_free(tok);
    return 0;
}
