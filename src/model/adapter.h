/* PEFT LoRA adapters, merged into the model's weights at load: W' = W + (alpha / r) B A (alpha / sqrt(r) with
 * rsLoRA), computed once in fp32. */
#ifndef TD_MODEL_ADAPTER_H
#define TD_MODEL_ADAPTER_H

#include "model/model.h"

/* Reads dir/adapter_config.json and dir/adapter_model.safetensors and merges every lora_A/lora_B pair into the
 * matching linear weight of m. Unsupported adapter kinds (DoRA, biases, modules_to_save, per-layer patterns,
 * embedding adapters), target modules that match no linear weight, tensors for modules that are not targets and
 * shapes that disagree with the model are errors naming the field or tensor. *n_merged receives the count. */
td_status td_adapter_apply(td_model *m, const char *dir, int *n_merged, double *scaling);

#endif
