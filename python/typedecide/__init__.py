"""typedecide: typed decisions with small local language models, from Python.

A binding of libtypedecide (the C library; its header include/typedecide.h is the manual of what each call does)
through ctypes: nothing is copied or reimplemented, so results are the library's bits, the same as the
``typedecide`` command line's.

    import typedecide as td
    m = td.Model("models/demo-qwen3")                       # a Hugging Face directory or a GGUF file
    criteria = [{"id": "refund", "question": "Does the customer ask for a refund?",
                 "options": [{"id": "yes", "description": "Yes"}, {"id": "no", "description": "No"}]}]
    for d in m.decide(open("models/demo/ticket.txt").read(), criteria):
        print(d.id, d.answer, d.probs)                      # refund yes [0.998..., 0.0015...]
    m.logits([1, 2, 3])                                     # numpy float32 [3, n_vocab]
    for t in m.generate("Hello", max_tokens=8, temperature=0): print(t.text, end="")

Errors raise ``typedecide.Error`` subclasses (FormatError, FileError, RangeError, ...) whose message is the
library's: it names the file, line, tensor, field or argument at fault.

Threads. A Model and a Tokenizer are immutable: share them between threads. ``Model.decide``, ``evaluate``,
``logits``, ``generate`` and ``chat`` may be called from several threads at once: each call works on a decider or
context of its own (deciders are pooled and reused), and every library call releases the GIL, so the calls run in
parallel with the same results as one after another. A Decider, a Generation and a Chat are used by one thread at a
time (a Decider serialises concurrent calls with a lock). ``threads=`` sets the worker threads inside each call;
results never depend on it.

The shared library is found through $TYPEDECIDE_LIBRARY (a path), else the one this package was installed against,
else the system's loader (libtypedecide.so.MAJOR after ``make install``).
"""

import ctypes
import json
from ctypes import byref, c_int, c_int32, c_int64, c_void_p

from . import _lib
from ._build import VERSION as __version__
from .errors import (DeviceError, Error, FileError, FormatError, InvalidArgumentError, NonFiniteError,
                     OutOfMemoryError, RangeError, StateError, UnsupportedError)
from .model import Chat, Decider, Decision, Evaluation, Generation, Model, Rows, Token, Tokenizer, _check, _text
from .slotmap import SlotMap

__all__ = ["Model", "Tokenizer", "Rows", "Decider", "Decision", "Evaluation", "Generation", "Token", "Chat",
           "SlotMap", "savings", "metrics", "library_version", "library_path", "cpu_kernels", "device_probe",
           "Error", "InvalidArgumentError", "FileError", "FormatError", "UnsupportedError", "OutOfMemoryError",
           "RangeError", "StateError", "NonFiniteError", "DeviceError", "__version__"]

lib = _lib.lib


def library_version():
    """td_version() of the loaded library ("MAJOR.MINOR.PATCH"; equal to __version__)."""
    return lib.td_version().decode()


def library_path():
    """The file the shared library was loaded from."""
    return _lib.path


def cpu_kernels():
    """The CPU kernel set a model loaded now would use ("amx", "avx512bf16", "avx512vnni", "avx2", "scalar")."""
    return lib.td_cpu_kernels().decode()


def device_probe(device="cuda"):
    """(True, description) when contexts on ``device`` can be made here, else (False, the library's reason)."""
    from .model import _device
    buf = ctypes.create_string_buffer(256)
    st = lib.td_device_probe(_device(device), buf, len(buf))
    return (True, buf.value.decode()) if st == 0 else (False, lib.td_last_error().decode())


_TIERS = (("fp32", 4.0), ("fp16", 2.0), ("q8_0", 1.0625), ("q4_0", 0.5625))


def savings(model=None, *, preset=None, letters=4, tied=None):
    """What a head pruned to ``letters`` option letters saves, as ``typedecide savings --json`` computes it: the
    head's parameters and share of the model, the download bytes removed per tier (0 for a tied head: its table is
    also the input embedding), and per criterion the head's FLOPs and logit bytes, full against pruned.
    ``model`` is a Model or a path; ``preset`` a published shape ("qwen3-8b", ...); ``tied`` overrides whether the
    head is tied (the parameter count follows)."""
    if (model is None) == (preset is None):
        raise InvalidArgumentError("savings: give exactly one of model and preset")
    if not 1 <= letters <= 20:
        raise InvalidArgumentError("savings: letters must be in 1..20")
    if preset is not None:
        text = lib.td_synth_preset_config(_text(preset))
        if text is None:
            raise InvalidArgumentError('savings: unknown preset "%s" (known: %s)'
                                       % (preset, lib.td_synth_preset_names().decode()))
        params, V, d, t = c_int64(), c_int32(), c_int32(), c_int()
        _check(lib.td_config_shape(text, len(text), _text(preset), byref(params), byref(V), byref(d), byref(t)))
        name, params, V, d, is_tied = preset, params.value, V.value, d.value, bool(t.value)
    else:
        m = model if isinstance(model, Model) else Model(model, tokenizer=False)
        name = m.path if isinstance(model, Model) else str(model)
        params, V, d, is_tied = m.n_params, m.n_vocab, m.n_embd, bool(m.describe().get("tied_embedding"))
    if tied is not None:  # what-if: the parameter count follows the head's storage
        if is_tied and not tied:
            params += V * d
        if not is_tied and tied:
            params -= V * d
        is_tied = bool(tied)
    head = V * d
    return {"model": name, "vocab_size": V, "hidden_size": d, "letters": letters, "tied": is_tied,
            "parameters": params, "head_parameters": head, "head_share": head / params,
            "download_bytes_removed": {t: 0 if is_tied else int((V - letters) * d * b) for t, b in _TIERS},
            "head_flop_per_criterion": 2 * head, "pruned_head_flop_per_criterion": 2 * letters * d,
            "logit_bytes_fp32": 4 * V, "pruned_logit_bytes_fp32": 4 * letters}


def metrics(predictions, *, bins=15):
    """The metrics of a predictions JSONL file (``Evaluation.write_predictions``, ``typedecide evaluate
    --predictions``) as a dict, with the cost summed from its lines: ``typedecide metrics``."""
    from .model import _Owned, _path
    h = c_void_p()
    _check(lib.td_predictions_load(_path(predictions), byref(h)))
    owner = _Owned(h.value, lib.td_predictions_free)
    out = c_void_p()
    _check(lib.td_predictions_metrics_json(owner.ptr, bins, byref(out)))
    return json.loads(_lib.take_string(out.value))
