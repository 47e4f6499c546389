/* Synthetic checkpoints: random weights in the exact tensor layout of a real architecture, for benchmarks and
 * tests at full size without downloading anything. */
#ifndef TD_MODEL_SYNTH_H
#define TD_MODEL_SYNTH_H

#include <stdint.h>

#include "util/dtype.h"
#include "typedecide.h"

/* config.json text of a named preset ("qwen3-0.6b", ...), or NULL if unknown. */
const char *td_preset_config(const char *name);
/* Comma-separated list of preset names, for help texts. */
const char *td_preset_names(void);

typedef void (*td_progress_fn)(void *user, double fraction);

/* Writes out_dir/{config.json, model.safetensors, generation_config.json} and, when tokenizer_json is given, a
 * copy of it (plus tokenizer_config.json found beside it). Weights are uniform in +-sqrt(3 / fan_in) (unit-variance
 * projections), norms near 1 (near 0 when the architecture scales by 1 + w). */
td_status td_synth_write(const char *out_dir, const char *config_json, const char *tokenizer_json, uint64_t seed,
                         td_dtype dtype, td_progress_fn progress, void *user);

#endif
