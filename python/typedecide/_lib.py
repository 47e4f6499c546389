"""The C library through ctypes: finding it, the structs the binding passes by value or pointer, the prototypes.

Every struct here mirrors one of include/typedecide.h field for field; tests/test_layout.py compiles a C program
that prints their sizes and offsets and compares them with these, so a header change that is not mirrored here
fails the suite instead of corrupting memory. ctypes releases the GIL for the whole of every foreign call, so long
calls (loading, decoding, deciding, evaluating, exporting) let other Python threads run.
"""

import ctypes
import os
from ctypes import (CFUNCTYPE, POINTER, Structure, c_char, c_char_p, c_double, c_float, c_int, c_int32, c_int64,
                    c_size_t, c_uint, c_uint64, c_void_p)

from . import _build

LIBRARY_ENV = "TYPEDECIDE_LIBRARY"

DECIDE_MAX_OPTIONS = 20

# flags and enum values, as the header defines them
TOKENIZE_PARSE_SPECIAL = 1
TOKENIZE_ADD_BOS = 2
CHAT_ALLOW_SPECIAL = 1
TOKENIZER_NO_NFC = 1
DECISION_ALLOWED_MASS = 1
DECISION_LOGITS = 2
DECISION_NO_MS = 4
ROWS_ANSWER = 1
ROWS_EVIDENCE = 2
ROWS_UNIQUE_IDS = 4
ROWS_SKIP_BAD = 8
GEN_EVENT_NONE, GEN_EVENT_PROMPT, GEN_EVENT_TOKEN, GEN_EVENT_DONE = 0, 1, 2, 3
GEN_FINISH_ERROR = 4

log_fn = CFUNCTYPE(None, c_void_p, c_int, c_char_p)
eval_progress_fn = CFUNCTYPE(None, c_void_p, c_int32, c_int32)


class ModelParams(Structure):
    _fields_ = [("load_tokenizer", c_int), ("adapter", c_char_p), ("log", log_fn), ("log_user", c_void_p)]


class ExportParams(Structure):
    _fields_ = [("quant", c_char_p), ("embed_quant", c_char_p), ("prune_letters", c_char_p), ("name", c_char_p),
                ("log", log_fn), ("log_user", c_void_p)]


class CtxParams(Structure):
    _fields_ = [("n_ctx", c_int32), ("n_batch", c_int32), ("n_seq_max", c_int32), ("n_threads", c_int32),
                ("n_outputs_max", c_int32), ("kv_f16", c_int32), ("deltanet_chunked", c_int32), ("device", c_int32),
                ("precision", c_int32)]


class DecideParams(Structure):
    _fields_ = [("instruction", c_char_p), ("letters", c_char_p), ("mode", c_int), ("allowed_mass", c_int),
                ("n_threads", c_int32), ("memory_mb", c_int64), ("max_batch", c_int32), ("kv_f16", c_int32),
                ("cache_head", c_int), ("device", c_int32), ("precision", c_int32)]


class Criterion(Structure):
    _fields_ = [("id", c_char_p), ("question", c_char_p), ("n_options", c_int32),
                ("option_ids", POINTER(c_char_p)), ("descriptions", POINTER(c_char_p))]


class Decision(Structure):
    _fields_ = [("n_options", c_int32), ("probs", c_float * DECIDE_MAX_OPTIONS),
                ("logits", c_float * DECIDE_MAX_OPTIONS), ("best", c_int32), ("allowed_mass", c_float),
                ("suffix_tokens", c_int32), ("ms", c_double)]


class DecideStats(Structure):
    _fields_ = [("forwards", c_int64), ("head_prefills", c_int64), ("head_tokens", c_int64),
                ("suffix_tokens", c_int64), ("head_macs", c_int64), ("criteria", c_int64),
                ("shared_tokens", c_int64), ("head_cached", c_int64), ("head_ms", c_double),
                ("suffix_ms", c_double), ("memory_mb", c_int64)]


class Row(Structure):
    _fields_ = [("line", c_int32), ("family", c_char_p), ("answer", c_char_p),
                ("evidence", POINTER(c_char)), ("evidence_len", c_size_t), ("criterion", Criterion)]


class EvalParams(Structure):
    _fields_ = [("mode", c_int), ("debias", c_int), ("shots", c_int32), ("shots_pool", c_void_p),
                ("prior_fraction", c_double), ("seed", c_uint64), ("max_tokens", c_int32), ("bins", c_int32),
                ("model_name", c_char_p), ("adapter_name", c_char_p), ("fixture_name", c_char_p),
                ("progress", eval_progress_fn), ("progress_user", c_void_p)]


class SamplerParams(Structure):
    _fields_ = [("temperature", c_float), ("top_k", c_int32), ("top_p", c_float), ("seed", c_uint64),
                ("min_p", c_float), ("repetition_penalty", c_float), ("presence_penalty", c_float),
                ("frequency_penalty", c_float), ("penalty_last_n", c_int32)]


class GenParams(Structure):
    _fields_ = [("n_ctx", c_int32), ("cache_bytes", c_int64), ("max_sequences", c_int32),
                ("max_running", c_int32), ("n_batch", c_int32), ("n_threads", c_int32), ("kv_f16", c_int32),
                ("device", c_int32), ("precision", c_int32), ("max_queue", c_int32), ("log", log_fn),
                ("log_user", c_void_p)]


class GenRequest(Structure):
    _fields_ = [("prompt", POINTER(c_int32)), ("n_prompt", c_int32), ("sampler", SamplerParams),
                ("max_tokens", c_int32), ("stop", POINTER(c_char_p)), ("n_stop", c_int32),
                ("stop_ids", POINTER(c_int32)), ("n_stop_ids", c_int32), ("ignore_eos", c_int),
                ("logprobs", c_int32), ("prompt_logprobs", c_int32), ("cache", c_int)]


class GenEvent(Structure):
    _fields_ = [("kind", c_int), ("request", c_int64),
                ("token", c_int32), ("index", c_int32), ("logprob", c_float), ("n_top", c_int32),
                ("top_ids", POINTER(c_int32)), ("top_logprobs", POINTER(c_float)),
                ("text", POINTER(c_char)), ("text_len", c_size_t),
                ("n_prompt", c_int32), ("n_reused", c_int32), ("n_prompt_logprobs", c_int32),
                ("prompt_logprobs", POINTER(c_float)), ("prompt_top_ids", POINTER(c_int32)),
                ("prompt_top_logprobs", POINTER(c_float)), ("n_prompt_top", c_int32),
                ("finish", c_int), ("n_generated", c_int32), ("stop_index", c_int32), ("stop_id", c_int32),
                ("error", c_char_p), ("ms_queue", c_double), ("ms_prefill", c_double),
                ("ms_first_token", c_double), ("ms_decode", c_double)]


class ChatParams(Structure):
    _fields_ = [("add_generation_prompt", c_int), ("enable_thinking", c_int), ("tools_json", c_char_p)]


class ChatMessage(Structure):
    _fields_ = [("role", c_char_p), ("content", c_char_p), ("reasoning_content", c_char_p),
                ("tool_calls_json", c_char_p)]


# the structs tests/test_layout.py checks against the header: Python name -> C type name
STRUCTS = {"ModelParams": "td_model_params", "ExportParams": "td_export_params", "CtxParams": "td_ctx_params",
           "DecideParams": "td_decide_params", "Criterion": "td_criterion", "Decision": "td_decision",
           "DecideStats": "td_decide_stats", "Row": "td_row", "EvalParams": "td_eval_params",
           "SamplerParams": "td_sampler_params", "GenParams": "td_gen_params", "GenRequest": "td_gen_request",
           "GenEvent": "td_gen_event", "ChatParams": "td_chat_params", "ChatMessage": "td_chat_message"}

_h = c_void_p  # every opaque handle
_st = c_int    # td_status
P = POINTER

# name: (restype, argtypes)
PROTOTYPES = {
    "td_status_str": (c_char_p, [_st]),
    "td_last_error": (c_char_p, []),
    "td_free": (None, [c_void_p]),
    "td_version": (c_char_p, []),
    "td_cpu_kernels": (c_char_p, []),
    "td_cpu_bf16_products": (c_int, []),
    "td_tokenizer_load": (_st, [c_char_p, P(_h)]),
    "td_tokenizer_load_gguf": (_st, [c_char_p, c_uint, P(_h)]),
    "td_tokenizer_to_json": (_st, [_h, P(c_void_p)]),
    "td_tokenizer_free": (None, [_h]),
    "td_tokenize": (_st, [_h, c_char_p, c_size_t, c_uint, P(P(c_int32)), P(c_size_t)]),
    "td_detokenize": (_st, [_h, P(c_int32), c_size_t, P(c_void_p), P(c_size_t)]),
    "td_token_bytes": (c_void_p, [_h, c_int32, P(c_size_t)]),
    "td_token_lookup": (c_int32, [_h, c_char_p]),
    "td_tokenizer_n_tokens": (c_int32, [_h]),
    "td_tokenizer_bos": (c_int32, [_h]),
    "td_model_default_params": (ModelParams, []),
    "td_model_load": (_st, [c_char_p, P(ModelParams), P(_h)]),
    "td_model_free": (None, [_h]),
    "td_model_tokenizer": (_h, [_h]),
    "td_model_n_vocab": (c_int32, [_h]),
    "td_model_n_embd": (c_int32, [_h]),
    "td_model_n_params": (c_int64, [_h]),
    "td_model_arch": (c_char_p, [_h]),
    "td_model_kernels": (c_char_p, [_h]),
    "td_model_is_hybrid": (c_int, [_h]),
    "td_model_n_ctx_train": (c_int32, [_h]),
    "td_model_path": (c_char_p, [_h]),
    "td_model_stop_ids": (P(c_int32), [_h, P(c_int)]),
    "td_model_chat_template": (c_char_p, [_h, P(c_char_p)]),
    "td_model_generation_config": (c_char_p, [_h]),
    "td_model_head_rows": (c_int32, [_h]),
    "td_model_can_generate": (c_int, [_h]),
    "td_model_slot_map": (c_char_p, [_h]),
    "td_model_describe": (_st, [_h, P(c_void_p)]),
    "td_export_default_params": (ExportParams, []),
    "td_model_export_gguf": (_st, [_h, P(ExportParams), c_char_p, P(c_void_p)]),
    "td_batch_new": (_st, [c_int32, P(_h)]),
    "td_batch_free": (None, [_h]),
    "td_batch_clear": (None, [_h]),
    "td_batch_add": (_st, [_h, c_int32, c_int32, c_int32, c_int]),
    "td_ctx_default_params": (CtxParams, []),
    "td_precision_parse": (c_int, [c_char_p]),
    "td_device_probe": (_st, [c_int, c_char_p, c_size_t]),
    "td_device_parse": (c_int, [c_char_p]),
    "td_ctx_new": (_st, [_h, P(CtxParams), P(_h)]),
    "td_ctx_free": (None, [_h]),
    "td_ctx_decode": (_st, [_h, _h]),
    "td_ctx_n_outputs": (c_int32, [_h]),
    "td_ctx_output": (c_void_p, [_h, c_int32]),
    "td_ctx_memory": (_st, [_h, P(CtxParams), P(c_int64)]),
    "td_decide_default_params": (DecideParams, []),
    "td_decide_default_instruction": (c_char_p, []),
    "td_decider_new": (_st, [_h, P(DecideParams), P(_h)]),
    "td_decider_free": (None, [_h]),
    "td_decider_slot_map": (c_char_p, [_h]),
    "td_decider_letters": (c_char_p, [_h]),
    "td_decide": (_st, [_h, c_char_p, c_size_t, P(Criterion), c_int32, P(Decision)]),
    "td_decide_ids": (_st, [_h, P(c_int32), c_int32, P(P(c_int32)), P(c_int32), P(c_int32), c_int32, P(Decision)]),
    "td_decider_stats": (DecideStats, [_h]),
    "td_decision_json": (_st, [P(Criterion), P(Decision), c_char_p, c_uint, P(c_void_p)]),
    "td_rows_parse": (_st, [c_char_p, c_size_t, c_char_p, c_uint, P(_h)]),
    "td_rows_load": (_st, [c_char_p, c_uint, P(_h)]),
    "td_rows_free": (None, [_h]),
    "td_rows_count": (c_int32, [_h]),
    "td_rows_get": (P(Row), [_h, c_int32]),
    "td_rows_n_bad": (c_int32, [_h]),
    "td_rows_bad": (c_char_p, [_h, c_int32]),
    "td_evidence_groups": (_st, [P(c_char_p), P(c_size_t), c_int32, P(c_int32), P(c_int32), P(c_int32)]),
    "td_eval_default_params": (EvalParams, []),
    "td_evaluate": (_st, [_h, _h, P(EvalParams), P(_h)]),
    "td_eval_free": (None, [_h]),
    "td_eval_metrics_json": (c_char_p, [_h]),
    "td_eval_results_json": (c_char_p, [_h]),
    "td_eval_write_predictions": (_st, [_h, c_char_p]),
    "td_predictions_load": (_st, [c_char_p, P(_h)]),
    "td_predictions_free": (None, [_h]),
    "td_predictions_metrics_json": (_st, [_h, c_int32, P(c_void_p)]),
    "td_synth_preset_config": (c_char_p, [c_char_p]),
    "td_synth_preset_names": (c_char_p, []),
    "td_config_shape": (_st, [c_char_p, c_size_t, c_char_p, P(c_int64), P(c_int32), P(c_int32), P(c_int)]),
    "td_sampler_default_params": (SamplerParams, []),
    "td_model_sampler_defaults": (SamplerParams, [_h]),
    "td_sampler_params_check": (_st, [P(SamplerParams)]),
    "td_chat_default_params": (ChatParams, []),
    "td_model_chat_family": (c_char_p, [_h, P(_st)]),
    "td_chat_tokenize": (_st, [_h, P(ChatMessage), c_int32, P(ChatParams), c_uint, P(c_void_p), P(P(c_int32)),
                               P(c_size_t)]),
    "td_gen_default_params": (GenParams, []),
    "td_gen_new": (_st, [_h, P(GenParams), P(_h)]),
    "td_gen_free": (None, [_h]),
    "td_gen_default_request": (GenRequest, []),
    "td_gen_submit": (_st, [_h, P(GenRequest), P(c_int64)]),
    "td_gen_cancel": (_st, [_h, c_int64]),
    "td_gen_step": (_st, [_h, P(c_int32)]),
    "td_gen_finish_str": (c_char_p, [c_int]),
    "td_gen_next_event": (c_int, [_h, P(GenEvent)]),
}


def _candidates():
    """Where the shared library may be, in the order tried."""
    env = os.environ.get(LIBRARY_ENV)
    if env:
        return [env]  # an explicit choice is the only one tried: a wrong path is an error, not a fallback
    found = []
    if _build.LIBRARY:  # the library this package was installed against (setup.py recorded it)
        found.append(_build.LIBRARY)
    found.append("libtypedecide.so.%s" % _build.VERSION.split(".")[0])  # the loader's search: ld.so.cache, ...
    return found


def _load():
    errors = []
    for path in _candidates():
        try:
            lib = ctypes.CDLL(path)
        except OSError as e:
            errors.append("%s: %s" % (path, e))
            continue
        for name, (restype, argtypes) in PROTOTYPES.items():
            fn = getattr(lib, name)
            fn.restype, fn.argtypes = restype, argtypes
        version = lib.td_version().decode()
        if version != _build.VERSION:
            raise ImportError("typedecide: %s is version %s, this package was built for %s: install the package "
                              "that comes with the library" % (path, version, _build.VERSION))
        return lib, path
    raise ImportError("typedecide: cannot load the shared library libtypedecide (tried: %s). Install it (`make "
                      "install`, then ldconfig) or name it with %s=/path/to/libtypedecide.so.0"
                      % ("; ".join(errors), LIBRARY_ENV))


lib, path = _load()


def take_string(ptr):
    """The bytes of a library-allocated NUL-terminated string, then td_free: for the char ** out-parameters."""
    if not ptr:
        return None
    try:
        return ctypes.string_at(ptr)
    finally:
        lib.td_free(ptr)
