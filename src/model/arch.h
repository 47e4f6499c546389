/* The tensors each architecture needs, with the shapes config.json implies. One description serves the loader
 * (which binds each tensor to its field in td_model), synth (which writes random ones) and inspection. */
#ifndef TD_MODEL_ARCH_H
#define TD_MODEL_ARCH_H

#include <stdint.h>

#include "model/model.h"

typedef struct td_tensor_spec {
    char name[192];
    int nd;
    int64_t dims[3];
    char why[200];   /* how the shape follows from config.json, for error messages */
    int is_norm;     /* a norm weight (synth initialises these near 1, or near 0 when zero-centred) */
    td_mat *mat;     /* where a matrix goes (NULL: a small tensor converted to fp32 into *vec) */
    float **vec;
} td_tensor_spec;

typedef td_status (*td_spec_fn)(void *user, const td_tensor_spec *spec);

/* Calls fn for every tensor of the text model described by cfg, in checkpoint order. With m != NULL the specs
 * point at m's fields (m->layers must be allocated); with m == NULL the destinations are NULL. Stops at the first
 * error fn returns. */
td_status td_arch_tensors(const td_config *cfg, td_model *m, td_spec_fn fn, void *user);

#endif
