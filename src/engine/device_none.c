/* The device side of a build without the CUDA backend: --device cuda is refused with the reason, at td_ctx_new (and
 * td_device_probe), so none of the other functions is reached. With -DTD_CUDA=ON, src/engine/cuda/ replaces this. */
#include <stdio.h>

#include "engine/engine.h"
#include "util/error.h"

td_status td_eng_dev_probe(td_device device, char *desc, size_t desc_len) {
    (void)device;
    if (desc && desc_len) snprintf(desc, desc_len, "none");
    return td_fail(TD_ERR_UNSUPPORTED,
                   "this typedecide was built without the CUDA backend (configure with cmake -DTD_CUDA=ON)");
}

td_status td_eng_dev_free_bytes(int64_t *free_bytes) {
    *free_bytes = 0;
    return td_eng_dev_probe(TD_DEVICE_CUDA, NULL, 0);
}

void *td_eng_dev_alloc(size_t bytes, int zero) {
    (void)bytes, (void)zero;
    return NULL;
}

void td_eng_dev_free(void *p) { (void)p; }

td_status td_eng_dev_open(td_ctx *ctx) {
    (void)ctx;
    return td_eng_dev_probe(TD_DEVICE_CUDA, NULL, 0);
}

void td_eng_dev_close(td_ctx *ctx) { (void)ctx; }

td_status td_forward_dev(td_ctx *ctx) {
    (void)ctx;
    return td_eng_dev_probe(TD_DEVICE_CUDA, NULL, 0);
}

td_status td_eng_dev_state_copy(td_ctx *ctx, int32_t dst, int32_t src) {
    (void)ctx, (void)dst, (void)src;
    return td_eng_dev_probe(TD_DEVICE_CUDA, NULL, 0);
}

td_status td_eng_dev_state_zero(td_ctx *ctx, int32_t seq) {
    (void)ctx, (void)seq;
    return td_eng_dev_probe(TD_DEVICE_CUDA, NULL, 0);
}

int64_t td_eng_dev_dn_state_floats(const td_config *c) {
    (void)c;
    return 0;
}

int td_eng_dev_kv_bf16(const td_config *c, const td_ctx_params *p) {
    (void)c, (void)p;
    return 0;
}
