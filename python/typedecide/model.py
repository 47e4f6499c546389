"""Models, deciders, rows, evaluations and generations over libtypedecide (see the package docstring)."""

import collections
import ctypes
import json
import os
import threading
from ctypes import POINTER, byref, c_char_p, c_int, c_int32, c_int64, c_size_t, c_void_p

import numpy as np

from . import _lib as L
from .errors import BY_STATUS, Error, InvalidArgumentError, StateError
from .slotmap import SlotMap

__all__ = ["Model", "Tokenizer", "Rows", "Decider", "Decision", "Evaluation", "Generation", "Token", "Chat"]

lib = L.lib

_MODES = {"batch": 0, "serial": 1, "fresh": 2}
_EVAL_MODES = {"readout": 0, "generate": 1}
_DEBIAS = {"none": 0, "cyclic": 1, "prior": 2}


def _fail(status):
    """The exception for a failed call: the class of its status, the library's message of this thread."""
    message = lib.td_last_error().decode("utf-8", "replace")
    e = BY_STATUS.get(status, Error)(message, status)
    e.status_name = lib.td_status_str(status).decode()
    return e


def _check(status):
    if status != 0:
        raise _fail(status)


def _text(s):
    """UTF-8 bytes of a str (lone surrogates passed through, for the library to refuse with its message)."""
    if isinstance(s, (bytes, bytearray, memoryview)):
        return bytes(s)
    if isinstance(s, str):
        return s.encode("utf-8", "surrogatepass")
    raise TypeError("expected str or bytes, not %s" % type(s).__name__)


def _opt_text(s):
    return None if s is None else _text(s)


def _path(p):
    return os.fsencode(os.fspath(p))


def _str(b):
    return None if b is None else b.decode("utf-8", "replace")


def _choice(table, value, what):
    try:
        return table[value]
    except KeyError:
        raise InvalidArgumentError("%s must be one of %s, not %r" % (what, ", ".join(table), value)) from None


def _device(name):
    d = lib.td_device_parse(_text(name))
    if d < 0:
        raise InvalidArgumentError("device must be 'cpu' or 'cuda', not %r" % (name,))
    return d


def _precision(name):
    p = lib.td_precision_parse(_text(name))
    if p < 0:
        raise InvalidArgumentError("precision must be 'fp32' or 'bf16', not %r" % (name,))
    return p


def _kv_f16(kv):
    if kv not in ("f32", "f16"):
        raise InvalidArgumentError("kv must be 'f32' or 'f16', not %r" % (kv,))
    return int(kv == "f16")


def _ids(ids, what):
    a = np.ascontiguousarray(ids, dtype=np.int64).reshape(-1)
    if a.size and (a.min() < -2**31 or a.max() >= 2**31):
        raise InvalidArgumentError("%s: ids must be 32-bit integers" % what)
    return np.ascontiguousarray(a, dtype=np.int32)


def _int32_ptr(a):
    return a.ctypes.data_as(POINTER(c_int32))


class _Owned:
    """One C object and its free function: freed once, by close() or when the last reference goes. `deps` are
    owners that must outlive it (a decider's model), and Python objects the C side points into (callbacks)."""

    __slots__ = ("ptr", "_free", "_deps", "__weakref__")

    def __init__(self, ptr, free, deps=()):
        self.ptr, self._free, self._deps = ptr, free, tuple(deps)

    def close(self):
        ptr, self.ptr = self.ptr, None
        if ptr:
            self._free(ptr)
        self._deps = ()

    def __del__(self):
        self.close()


def _new(fn, *args, free, deps=()):
    out = c_void_p()
    _check(fn(*args, byref(out)))
    return _Owned(out.value, free, deps)


class Tokenizer:
    """A byte-level BPE tokenizer (tokenizer.json, or the tokenizer.ggml.* metadata of a GGUF file), immutable:
    any number of threads may use one at once. ``Model.tokenizer`` is the model's own."""

    def __init__(self, path, *, nfc=True):
        """Loads ``path``: a tokenizer.json, or a GGUF file (whatever its architecture, with or without weights).
        ``nfc=False`` (GGUF only) leaves out the NFC normalizer, as llama.cpp does."""
        p = _path(path)
        if p.endswith(b".gguf"):
            self._h = _new(lib.td_tokenizer_load_gguf, p, 0 if nfc else L.TOKENIZER_NO_NFC,
                           free=lib.td_tokenizer_free)
        else:
            if not nfc:
                raise InvalidArgumentError("nfc=False applies to GGUF files: a tokenizer.json names its normalizer")
            self._h = _new(lib.td_tokenizer_load, p, free=lib.td_tokenizer_free)
        self._ptr = self._h.ptr

    @classmethod
    def _borrowed(cls, ptr, owner):
        t = cls.__new__(cls)
        t._h, t._ptr = owner, ptr  # lives as long as the model that owns it
        return t

    def tokenize(self, text, *, special=False, add_bos=False):
        """The token ids of ``text`` (str or UTF-8 bytes), exactly as Hugging Face's tokenizers. ``special=True``
        splits out added tokens (<|im_start|>, <think>, ...) as their own ids; ``add_bos=True`` puts the
        tokenizer's BOS first where it has one (Qwen's have none). Invalid UTF-8 raises FormatError naming the byte
        offset."""
        b = _text(text)
        ids, n = POINTER(c_int32)(), c_size_t()
        flags = (L.TOKENIZE_PARSE_SPECIAL if special else 0) | (L.TOKENIZE_ADD_BOS if add_bos else 0)
        _check(lib.td_tokenize(self._ptr, b, len(b), flags, byref(ids), byref(n)))
        try:
            return ids[:n.value] if n.value else []
        finally:
            lib.td_free(ids)

    encode = tokenize

    def detokenize(self, ids):
        """The text of ``ids`` (added tokens as their content). An id outside the vocabulary raises RangeError.
        Bytes that are not UTF-8 (a cut multi-byte character) become U+FFFD."""
        a = _ids(ids, "detokenize")
        text, n = c_void_p(), c_size_t()
        _check(lib.td_detokenize(self._ptr, _int32_ptr(a), a.size, byref(text), byref(n)))
        try:
            return ctypes.string_at(text, n.value).decode("utf-8", "replace")
        finally:
            lib.td_free(text)

    decode = detokenize

    def token_bytes(self, token):
        """The raw bytes of one token (maybe part of a UTF-8 character), or None outside the vocabulary."""
        n = c_size_t()
        p = lib.td_token_bytes(self._ptr, token, byref(n))
        return None if not p else ctypes.string_at(p, n.value)

    @property
    def bos(self):
        """The BOS id, or None when the tokenizer has none (Qwen's)."""
        t = lib.td_tokenizer_bos(self._ptr)
        return None if t < 0 else t

    def token_id(self, piece):
        """The id of a token given by its exact vocabulary string ("<|im_end|>", "ĠA"), or None."""
        t = lib.td_token_lookup(self._ptr, _text(piece))
        return None if t < 0 else t

    def __len__(self):
        """Ids the tokenizer can produce (vocabulary and added tokens)."""
        return lib.td_tokenizer_n_tokens(self._ptr)

    def to_json(self):
        """The tokenizer as a Hugging Face tokenizer.json (str)."""
        out = c_void_p()
        _check(lib.td_tokenizer_to_json(self._ptr, byref(out)))
        return L.take_string(out.value).decode("utf-8")


class Rows:
    """Criteria or fixture rows, parsed by the library: ``{"id", "question", "options": [{"id", "description"},
    ...]}`` and, as needed, "family", "evidence", "answer" (DESIGN.md's data formats).

    ``source`` is a path to a JSONL file (str or os.PathLike), JSONL bytes, or a list of rows (dicts, or JSON
    strings), whose row i is line i + 1 in messages. A bad row raises FormatError ("SOURCE:LINE: what is wrong"),
    or with ``skip_bad`` is recorded in ``bad`` and left out. ``answer``, ``evidence`` and ``unique_ids`` require
    every row to have an answer among its options, its own evidence, an id of its own. Immutable.
    """

    def __init__(self, source, *, answer=False, evidence=False, unique_ids=False, skip_bad=False, name=None):
        flags = ((L.ROWS_ANSWER if answer else 0) | (L.ROWS_EVIDENCE if evidence else 0) |
                 (L.ROWS_UNIQUE_IDS if unique_ids else 0) | (L.ROWS_SKIP_BAD if skip_bad else 0))
        if isinstance(source, (str, os.PathLike)):
            self._h = _new(lib.td_rows_load, _path(source), flags, free=lib.td_rows_free)
            self.name = os.fspath(source)
        else:
            if isinstance(source, (bytes, bytearray, memoryview)):
                data = bytes(source)
            else:
                data = "".join((r if isinstance(r, str) else json.dumps(r, ensure_ascii=False)) + "\n"
                               for r in source).encode("utf-8", "surrogatepass")
            self.name = name or "criteria"
            self._h = _new(lib.td_rows_parse, data, len(data), _text(self.name), flags, free=lib.td_rows_free)
        self._n = lib.td_rows_count(self._h.ptr)

    @classmethod
    def of(cls, source, **flags):
        """``source`` itself when it is a Rows, else Rows(source, **flags)."""
        return source if isinstance(source, Rows) else cls(source, **flags)

    def __len__(self):
        return self._n

    def _row(self, i):
        return lib.td_rows_get(self._h.ptr, i).contents

    def __getitem__(self, i):
        """Row i as a dict (a copy): id, question, options [{"id", "description"}], family, answer, evidence, line."""
        if i < 0:
            i += self._n
        if not 0 <= i < self._n:
            raise IndexError(i)
        r = self._row(i)
        c = r.criterion
        return {"id": _str(c.id), "question": _str(c.question),
                "options": [{"id": _str(c.option_ids[k]), "description": _str(c.descriptions[k])}
                            for k in range(c.n_options)],
                "family": _str(r.family), "answer": _str(r.answer),
                "evidence": None if not r.evidence else
                ctypes.string_at(r.evidence, r.evidence_len).decode("utf-8", "replace"),
                "line": r.line}

    def __iter__(self):
        return (self[i] for i in range(self._n))

    @property
    def bad(self):
        """Messages of the rows left out under skip_bad ("SOURCE:LINE: what is wrong")."""
        return [_str(lib.td_rows_bad(self._h.ptr, i)) for i in range(lib.td_rows_n_bad(self._h.ptr))]


class Decision:
    """One criterion's typed decision. ``probs`` (and ``logits``) are in the order the options were shown, as
    Python floats holding the library's float32 values exactly; ``answer`` is the id of the most probable option
    (the first on ties), ``letter`` its letter; ``allowed_mass`` is None unless the decider was asked for it."""

    __slots__ = ("id", "options", "letter", "answer", "best", "probs", "logits", "allowed_mass", "suffix_tokens",
                 "ms", "_c", "_crit", "_letters", "_flags", "_rows")

    def __init__(self, c, crit, letters, flags, rows):
        k = c.n_options
        self.best = c.best
        self.probs = c.probs[:k]
        self.logits = c.logits[:k]
        self.allowed_mass = c.allowed_mass if flags & L.DECISION_ALLOWED_MASS else None
        self.suffix_tokens = c.suffix_tokens
        self.ms = c.ms
        self.letter = letters[c.best:c.best + 1].decode()
        self._c, self._crit, self._letters, self._flags, self._rows = c, crit, letters, flags, rows
        if crit is None:  # decide_ids: no criterion, no ids
            self.id = self.options = self.answer = None
        else:
            self.id = _str(crit.id)
            self.options = [_str(crit.option_ids[i]) for i in range(k)]
            self.answer = self.options[c.best]

    def json(self, *, ms=False, logits=False):
        """The line ``typedecide decide`` prints for it (the library's writer: 9 significant digits, exact for a
        float32), without "ms" unless asked (the wall time, the one member that differs between runs)."""
        if self._crit is None:
            raise StateError("a decision of decide_ids has no criterion to write")
        flags = self._flags | (0 if ms else L.DECISION_NO_MS) | (L.DECISION_LOGITS if logits else 0)
        out = c_void_p()
        _check(lib.td_decision_json(byref(self._crit), byref(self._c), self._letters, flags, byref(out)))
        return L.take_string(out.value).decode("utf-8")

    def to_dict(self):
        """The decision as a plain dict (ms included)."""
        return {"id": self.id, "answer": self.answer, "letter": self.letter, "options": self.options,
                "probs": self.probs, "logits": self.logits, "allowed_mass": self.allowed_mass,
                "suffix_tokens": self.suffix_tokens, "ms": self.ms}

    def __repr__(self):
        return "Decision(id=%r, answer=%r, probs=%s)" % (self.id, self.answer, ["%.4f" % p for p in self.probs])


class Decider:
    """A td_decider: the option letters probed on the model ("Answer:" then the letter), and a context sized by
    the first call, within ``memory_mb``. It keeps no text between calls except, with ``cache_head``, the last
    head prefilled. One thread at a time: concurrent calls on one Decider wait for each other (a lock);
    ``Model.decide`` gives every concurrent call a decider of its own."""

    def __init__(self, model, *, letters=None, instruction=None, mode="batch", allowed_mass=False, threads=None,
                 memory_mb=None, max_batch=0, kv=None, cache_head=False):
        p = lib.td_decide_default_params()
        self._keep = (_opt_text(letters), _opt_text(instruction))  # the params point into these
        p.letters, p.instruction = self._keep
        p.mode = _choice(_MODES, mode, "mode")
        p.allowed_mass = int(bool(allowed_mass))
        p.n_threads = threads or model.threads
        p.memory_mb = memory_mb or model.memory_mb
        p.max_batch = max_batch
        p.kv_f16 = _kv_f16(kv or model.kv)
        p.cache_head = int(bool(cache_head))
        p.device, p.precision = model._device, model._precision
        self.model = model
        self._h = _new(lib.td_decider_new, model._ptr(), byref(p), free=lib.td_decider_free, deps=(model._h,))
        self._flags = L.DECISION_ALLOWED_MASS if allowed_mass else 0
        self._letters = lib.td_decider_letters(self._h.ptr)
        self._lock = threading.Lock()

    @property
    def letters(self):
        """The option letters in order ("ABCD...")."""
        return self._letters.decode()

    @property
    def slot_map(self):
        """The SlotMap: which token each letter is, right after "Answer:"."""
        return SlotMap.from_json(lib.td_decider_slot_map(self._h.ptr).decode("utf-8"))

    def stats(self):
        """Counters since creation: forward passes, prefills, tokens, head multiply-adds, milliseconds."""
        s = lib.td_decider_stats(self._h.ptr)
        return {name: getattr(s, name) for name, _ in L.DecideStats._fields_}

    def decide(self, evidence, criteria):
        """Decides every criterion (a Rows, or what Rows takes) over ``evidence`` (str or UTF-8 bytes; None when
        every criterion carries its own "evidence"). Criteria with the same evidence share one prefill, as in
        ``typedecide decide``; returns one Decision per criterion, in order. Errors name the criterion."""
        rows = Rows.of(criteria)
        n = len(rows)
        if n == 0:
            return []
        ev = None if evidence is None else _text(evidence)
        texts, lens = (c_void_p * n)(), (c_size_t * n)()
        crits = []
        for i in range(n):
            r = rows._row(i)
            crits.append(r.criterion)
            if r.evidence:
                texts[i], lens[i] = ctypes.cast(r.evidence, c_void_p).value, r.evidence_len
            elif ev is not None:
                texts[i], lens[i] = ctypes.cast(c_char_p(ev), c_void_p).value, len(ev)
            else:
                raise InvalidArgumentError('%s:%d: row "%s" has no "evidence" and no evidence was given'
                                           % (rows.name, r.line, _str(r.criterion.id)))
        group, order, n_groups = (c_int32 * n)(), (c_int32 * n)(), c_int32()
        _check(lib.td_evidence_groups(ctypes.cast(texts, POINTER(c_char_p)), lens, n, group, order,
                                      byref(n_groups)))
        out = [None] * n
        at = 0
        with self._lock:
            while at < n:  # order lists the rows group by group
                g = group[order[at]]
                members = []
                while at < n and group[order[at]] == g:
                    members.append(order[at])
                    at += 1
                cs = (L.Criterion * len(members))(*(crits[i] for i in members))
                ds = (L.Decision * len(members))()
                first = members[0]
                _check(lib.td_decide(self._h.ptr, ctypes.cast(texts[first], c_char_p), lens[first], cs,
                                     len(members), ds))
                for j, i in enumerate(members):
                    out[i] = Decision(ds[j], cs[j], self._letters, self._flags, rows)
        return out

    def decide_ids(self, head, suffixes, n_options):
        """The readout on token ids: ``head`` (instruction + evidence) once, then each suffix (a list of id lists)
        from it; ``n_options[i]`` letters are read for suffix i. Decisions without criterion ids."""
        h = _ids(head, "decide_ids: head")
        sufs = [_ids(s, "decide_ids: suffix") for s in suffixes]
        n = len(sufs)
        if len(n_options) != n:
            raise InvalidArgumentError("decide_ids: %d suffixes but %d option counts" % (n, len(n_options)))
        ptrs = (POINTER(c_int32) * n)(*(_int32_ptr(s) for s in sufs))
        ns = (c_int32 * n)(*(s.size for s in sufs))
        no = (c_int32 * n)(*n_options)
        ds = (L.Decision * n)()
        with self._lock:
            _check(lib.td_decide_ids(self._h.ptr, _int32_ptr(h), h.size, ptrs, ns, no, n, ds))
        return [Decision(ds[i], None, self._letters, self._flags, None) for i in range(n)]

    def close(self):
        """Frees the decider now (also done when it is garbage)."""
        self._h.close()


class Evaluation:
    """What ``Model.evaluate`` measured: ``metrics`` (accuracy, family balanced accuracy, Brier, ECE, order
    consistency, rstd, cost, per criterion) and ``results`` (the metrics and what ran), as dicts."""

    def __init__(self, h, rows):
        self._h, self._keep = h, rows
        self.metrics = json.loads(lib.td_eval_metrics_json(h.ptr).decode("utf-8"))
        self.results = json.loads(lib.td_eval_results_json(h.ptr).decode("utf-8"))

    def write_predictions(self, path):
        """Writes the predictions JSONL (the input of ``typedecide metrics`` and ``typedecide.metrics``)."""
        _check(lib.td_eval_write_predictions(self._h.ptr, _path(path)))


class Token:
    """One generated token: ``id``, ``text`` (the text released with it: complete UTF-8 characters; text that may
    begin a stop string is held back and comes with a later token), ``logprob`` (when asked), ``stop`` (True for
    a stop id that ended the generation: it is yielded last and adds no text of its own)."""

    __slots__ = ("id", "text", "logprob", "stop")

    def __init__(self, id, text, logprob=None, stop=False):
        self.id, self.text, self.logprob, self.stop = id, text, logprob, stop

    def __repr__(self):
        return "Token(%d, %r%s)" % (self.id, self.text, ", stop" if self.stop else "")


class Generation:
    """An iterator of Tokens over one generation request, stepped as it is iterated (each step one batched
    forward pass, the GIL released). After the last token: ``finish`` ("stop" or "length"), ``stop_id`` (or
    None), ``stop_index`` (the stop string that matched, or None), ``text`` (all released text), ``ids``,
    ``n_prompt``, ``n_reused`` (prompt tokens taken from a cached session). One thread at a time."""

    def __init__(self, model, gen, prompt, max_tokens, sampler, stop, ignore_eos, logprobs, cache, on_done=None):
        self.model, self._gen = model, gen
        self.finish = self.stop_id = self.stop_index = None
        self.n_prompt = self.n_reused = None
        self.ids, self._texts, self._queue = [], [], collections.deque()
        self._done, self._on_done = False, on_done
        stops = [_text(s) for s in ([stop] if isinstance(stop, (str, bytes)) else (stop or []))]
        self._prompt = _ids(prompt, "generate: prompt")
        rq = lib.td_gen_default_request()
        rq.prompt, rq.n_prompt = _int32_ptr(self._prompt), self._prompt.size
        rq.sampler = sampler
        rq.max_tokens = max_tokens
        self._stops = (c_char_p * max(1, len(stops)))(*stops)
        rq.stop, rq.n_stop = self._stops, len(stops)
        rq.ignore_eos = int(bool(ignore_eos))
        rq.logprobs = -1 if logprobs is None else logprobs
        rq.cache = int(bool(cache))
        rid = c_int64()
        _check(lib.td_gen_submit(gen.ptr, byref(rq), byref(rid)))
        self._id = rid.value
        if max_tokens == 0:
            self._drain()

    @property
    def text(self):
        """All the text released so far."""
        return "".join(self._texts)

    def __iter__(self):
        return self

    def __next__(self):
        while not self._queue:
            if self._done:
                raise StopIteration
            self._step()
        return self._queue.popleft()

    def _step(self):
        active = c_int32()
        _check(lib.td_gen_step(self._gen.ptr, byref(active)))
        ev, error = L.GenEvent(), None
        while lib.td_gen_next_event(self._gen.ptr, byref(ev)):
            if ev.request != self._id:
                continue
            text = ctypes.string_at(ev.text, ev.text_len).decode("utf-8", "replace") if ev.text_len else ""
            if ev.kind == L.GEN_EVENT_PROMPT:
                self.n_prompt, self.n_reused = ev.n_prompt, ev.n_reused
            elif ev.kind == L.GEN_EVENT_TOKEN:
                lp = None if ev.logprob != ev.logprob else ev.logprob  # NAN unless asked
                self._queue.append(Token(ev.token, text, lp))
                self.ids.append(ev.token)
                self._texts.append(text)
            elif ev.kind == L.GEN_EVENT_DONE:
                self._done = True
                self.finish = lib.td_gen_finish_str(ev.finish).decode()
                self.stop_id = None if ev.stop_id < 0 else ev.stop_id
                self.stop_index = None if ev.stop_index < 0 else ev.stop_index
                if ev.finish == L.GEN_FINISH_ERROR:
                    error = _str(ev.error) or "generation failed"
                if self._queue and self.stop_id is not None and self._queue[-1].id == self.stop_id:
                    self._queue[-1].stop = True
                if text:  # held back until the end: with the last token (of this step, as the DONE is)
                    if self._queue:
                        self._queue[-1].text += text
                    else:
                        self._queue.append(Token(-1, text))
                    self._texts.append(text)
        if error is not None:
            raise Error(error)
        if not self._done and active.value == 0:
            raise Error("generation: the request ended without a result")
        if self._done and self._on_done:
            self._on_done(self)

    def _drain(self):
        for _ in self:
            pass

    def read(self):
        """Runs the generation to its end and returns all its text."""
        self._drain()
        return self.text

    def close(self):
        """Cancels the request if it is still running."""
        if not self._done and self._gen.ptr:
            lib.td_gen_cancel(self._gen.ptr, self._id)
            self._done = True


class Chat:
    """A conversation with KV reuse: every turn forks from the cached session of the previous one, so a turn costs
    its new tokens. ``send(text)`` returns the reply's Generation; when it has been read to the end, the reply joins
    ``messages`` (a reply left unfinished is cancelled by the next send, and what it said so far joins them).
    One thread at a time."""

    def __init__(self, model, *, system=None, think=False, tools=None, allow_special=False, memory_mb=None,
                 threads=None, kv=None, **sampling):
        if not model.can_generate:
            raise StateError("%s: the output head was pruned to the option letters: it cannot chat" % model.path)
        self.model, self.think, self.tools, self._sampling = model, think, tools, sampling
        self.allow_special = allow_special
        self.messages = [{"role": "system", "content": system}] if system is not None else []
        gp = lib.td_gen_default_params()
        gp.cache_bytes = (memory_mb or model.memory_mb) << 20
        gp.n_threads = threads or model.threads
        gp.kv_f16 = _kv_f16(kv or model.kv)
        gp.device, gp.precision = model._device, model._precision
        self._gen = _new(lib.td_gen_new, model._ptr(), byref(gp), free=lib.td_gen_free, deps=(model._h,))
        self._last = None

    def send(self, content, *, max_tokens=256, **sampling):
        """Adds a user turn and returns the assistant's reply as a Generation (sampling: see Model.generate)."""
        last = self._last
        if last is not None and not last._done:
            last.close()
            self.messages.append({"role": "assistant", "content": last.text})
        self.messages.append({"role": "user", "content": content})
        ids = self.model._render(self.messages, self.think, self.tools, self.allow_special)
        kw = dict(self._sampling, **sampling)

        def done(g):
            self.messages.append({"role": "assistant", "content": g.text})
        self._last = self.model._generation(self._gen, ids, max_tokens, cache=True, on_done=done, **kw)
        return self._last


class _Buffer:
    """A context's output buffer as a numpy array: the array's base, holding the context (its owner) alive."""

    def __init__(self, ptr, shape, owner):
        self.__array_interface__ = {"data": (ptr, False), "shape": shape, "typestr": "<f4", "version": 3}
        self._owner = owner


class Model:
    """A Qwen3 / Qwen3.5 checkpoint: a Hugging Face directory (config.json, safetensors, tokenizer files) or a GGUF
    file, mapped read-only. Immutable: any number of threads may use one Model at once; each concurrent decide,
    evaluate, logits or generate call gets a decider or context of its own (made on first need and kept for reuse),
    and every library call releases the GIL, so threads run in parallel.

    ``device`` ("cpu" or "cuda") and ``precision`` ("fp32", exact, the default; "bf16", faster and less exact) apply
    to every context made from the model; ``threads`` (default: every core) are each context's worker threads (the
    results do not depend on them); ``memory_mb`` is each context's budget; ``kv`` "f16" halves the KV cache;
    ``adapter`` merges a PEFT LoRA adapter at load; ``log(level, message)`` receives the loader's diagnostics.
    """

    def __init__(self, path, *, device="cpu", precision="fp32", threads=None, memory_mb=1024, kv="f32",
                 adapter=None, tokenizer=True, log=None):
        self._device, self._precision = _device(device), _precision(precision)
        self.device, self.precision = device, precision
        self.threads = int(threads or os.cpu_count() or 1)
        self.memory_mb = int(memory_mb)
        _kv_f16(kv)
        self.kv = kv
        if self._device != 0:  # before loading, as the tool does: a build or machine without it says why
            desc = ctypes.create_string_buffer(256)
            _check(lib.td_device_probe(self._device, desc, len(desc)))
        mp = lib.td_model_default_params()
        mp.load_tokenizer = int(bool(tokenizer))
        keep = [_opt_text(None if adapter is None else os.fspath(adapter))]
        mp.adapter = keep[0]
        if log is not None:
            keep.append(L.log_fn(lambda user, level, message: log(level, message.decode("utf-8", "replace"))))
            mp.log = keep[-1]
        self._h = _new(lib.td_model_load, _path(path), byref(mp), free=lib.td_model_free, deps=keep)
        self._pool, self._pool_lock = {}, threading.Lock()
        tok = lib.td_model_tokenizer(self._h.ptr)
        self.tokenizer = Tokenizer._borrowed(tok, self._h) if tok else None

    def _ptr(self):
        if not self._h.ptr:
            raise StateError("the model was closed")
        return self._h.ptr

    def close(self):
        """Releases the model (and its idle deciders) as soon as nothing made from it is in use."""
        with self._pool_lock:
            self._pool.clear()
        self.tokenizer = None
        self._h = _Owned(None, None)  # objects made from the model keep the old owner, hence the C model

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # what the model is
    path = property(lambda self: _str(lib.td_model_path(self._ptr())), doc="The path it was loaded from.")
    arch = property(lambda self: _str(lib.td_model_arch(self._ptr())), doc='"qwen3", "qwen35", ...')
    n_vocab = property(lambda self: lib.td_model_n_vocab(self._ptr()), doc="Entries of a full logits row.")
    n_embd = property(lambda self: lib.td_model_n_embd(self._ptr()), doc="Hidden size.")
    n_params = property(lambda self: lib.td_model_n_params(self._ptr()), doc="Parameters (a tied head once).")
    n_ctx_train = property(lambda self: lib.td_model_n_ctx_train(self._ptr()), doc="max_position_embeddings.")
    kernels = property(lambda self: _str(lib.td_model_kernels(self._ptr())), doc="The CPU kernel set it uses.")
    is_hybrid = property(lambda self: bool(lib.td_model_is_hybrid(self._ptr())), doc="Gated DeltaNet layers.")
    can_generate = property(lambda self: bool(lib.td_model_can_generate(self._ptr())),
                            doc="False for a head pruned to the option letters.")
    head_rows = property(lambda self: lib.td_model_head_rows(self._ptr()), doc="n_vocab, or K when pruned.")

    @property
    def stop_ids(self):
        """The model's stop token ids (generation_config.json, tokenizer_config.json or GGUF metadata)."""
        n = c_int()
        p = lib.td_model_stop_ids(self._ptr(), byref(n))
        return p[:n.value] if n.value else []

    @property
    def slot_map(self):
        """The SlotMap of a head pruned to the option letters, else None."""
        s = lib.td_model_slot_map(self._ptr())
        return None if s is None else SlotMap.from_json(s.decode("utf-8"))

    @property
    def generation_config(self):
        """generation_config.json as a dict, or None."""
        s = lib.td_model_generation_config(self._ptr())
        return None if s is None else json.loads(s)

    @property
    def chat_template(self):
        """The chat template's text, or None."""
        return _str(lib.td_model_chat_template(self._ptr(), None))

    def describe(self):
        """Architecture, parameters, tied head, every tensor's type, shape and bytes, skipped tensors, slot map."""
        out = c_void_p()
        _check(lib.td_model_describe(self._ptr(), byref(out)))
        return json.loads(L.take_string(out.value))

    def sampler_defaults(self):
        """The model's sampling defaults (generation_config.json over the library's greedy defaults)."""
        s = lib.td_model_sampler_defaults(self._ptr())
        return {name: getattr(s, name) for name, _ in L.SamplerParams._fields_}

    # text
    def _tok(self):
        if self.tokenizer is None:
            raise StateError("%s has no tokenizer (tokenizer.json)" % self.path)
        return self.tokenizer

    def tokenize(self, text, *, special=False, add_bos=False):
        """The model tokenizer's ids of ``text`` (see Tokenizer.tokenize)."""
        return self._tok().tokenize(text, special=special, add_bos=add_bos)

    def detokenize(self, ids):
        """The text of ``ids`` (see Tokenizer.detokenize)."""
        return self._tok().detokenize(ids)

    # decisions
    def decider(self, **params):
        """A Decider of its own (letters, instruction, mode "batch" | "serial" | "fresh", allowed_mass, threads,
        memory_mb, max_batch, kv, cache_head)."""
        return Decider(self, **params)

    def _pooled(self, params):
        key = tuple(sorted(params.items()))
        with self._pool_lock:
            idle = self._pool.setdefault(key, [])
            d = idle.pop() if idle else None
        return key, d or Decider(self, **params)

    def _release(self, key, d):
        with self._pool_lock:
            if self._h.ptr:
                self._pool.setdefault(key, []).append(d)

    def decide(self, evidence, criteria, **params):
        """Typed decisions: for each criterion (a Rows, a JSONL path, JSONL bytes or a list of dicts), a probability
        per option, read from the letters' logits after "Answer:" (Decider.decide). ``params`` as for decider().
        Bit for bit the probabilities of ``typedecide decide`` on the same inputs, in every mode and thread count."""
        rows = Rows.of(criteria)
        key, d = self._pooled(params)
        try:
            return d.decide(evidence, rows)
        finally:
            self._release(key, d)

    def evaluate(self, rows, *, mode="readout", debias="none", shots=0, shots_pool=None, prior_fraction=0.05,
                 seed=1, max_tokens=8, bins=15, model_name=None, adapter_name=None, fixture_name=None,
                 progress=None, **params):
        """Scores labelled rows (each with evidence and an answer; a path or list is parsed with unique ids, as
        ``typedecide evaluate`` does) and returns an Evaluation with the metrics. mode "readout" | "generate";
        debias "none" | "cyclic" | "prior"; ``shots`` worked examples per evidence from ``shots_pool`` (default:
        the rows); ``progress(groups_done, n_groups)`` after each evidence group; ``params`` as for decider()."""
        rows = Rows.of(rows, answer=True, evidence=True, unique_ids=True)
        pool = None if shots_pool is None else Rows.of(shots_pool, answer=True)
        ep = lib.td_eval_default_params()
        ep.mode = _choice(_EVAL_MODES, mode, "mode")
        ep.debias = _choice(_DEBIAS, debias, "debias")
        ep.shots, ep.prior_fraction, ep.seed, ep.max_tokens, ep.bins = shots, prior_fraction, seed, max_tokens, bins
        ep.shots_pool = None if pool is None else pool._h.ptr
        names = [_opt_text(model_name), _opt_text(adapter_name), _opt_text(fixture_name)]
        ep.model_name, ep.adapter_name, ep.fixture_name = names
        if progress is not None:
            cb = L.eval_progress_fn(lambda user, done, n: progress(done, n))
            ep.progress = cb
        key, d = self._pooled(params)
        try:
            with d._lock:
                h = _new(lib.td_evaluate, d._h.ptr, rows._h.ptr, byref(ep), free=lib.td_eval_free)
        finally:
            self._release(key, d)
        return Evaluation(h, (rows, pool, names))  # the result points into the rows, the pool and the names

    # the raw layers
    def logits(self, ids, *, threads=None, memory_mb=None):
        """float32 logits of every position of ``ids``, shape [len(ids), n_vocab], as ``typedecide logits`` writes
        them. When a context holding every position's logits fits ``memory_mb`` (default: the model's), the
        array IS that context's output buffer (no copy; freed with the array); otherwise positions run in chunks
        and are copied into one array."""
        a = _ids(ids, "logits")
        n = a.size
        if n == 0:
            raise InvalidArgumentError("logits: no ids")
        if not self.can_generate:
            raise StateError("%s: the output head was pruned to the option letters (slot map %s): there are no "
                             "full-vocabulary logits" % (self.path, _str(lib.td_model_slot_map(self._ptr()))))
        V, budget = self.n_vocab, (memory_mb or self.memory_mb) << 20
        cp = lib.td_ctx_default_params()
        cp.n_ctx, cp.n_threads = n, threads or self.threads
        cp.device, cp.precision = self._device, self._precision
        chunk = n
        while True:  # the largest batch whose context fits the budget
            cp.n_batch = cp.n_outputs_max = chunk
            need = c_int64()
            _check(lib.td_ctx_memory(self._ptr(), byref(cp), byref(need)))
            if need.value <= budget or chunk == 1:
                break
            chunk = (chunk + 1) // 2
        ctx = _new(lib.td_ctx_new, self._ptr(), byref(cp), free=lib.td_ctx_free, deps=(self._h,))
        batch = _new(lib.td_batch_new, chunk, free=lib.td_batch_free)
        out = None if chunk == n else np.empty((n, V), dtype=np.float32)
        for start in range(0, n, chunk):
            lib.td_batch_clear(batch.ptr)
            for j in range(start, min(n, start + chunk)):
                _check(lib.td_batch_add(batch.ptr, int(a[j]), 0, j, 1))
            _check(lib.td_ctx_decode(ctx.ptr, batch.ptr))
            ptrs = [lib.td_ctx_output(ctx.ptr, i) for i in range(lib.td_ctx_n_outputs(ctx.ptr))]
            if out is None and all(p == ptrs[0] + 4 * V * i for i, p in enumerate(ptrs)):
                return np.asarray(_Buffer(ptrs[0], (n, V), ctx))  # one buffer, rows in order: no copy
            if out is None:
                out = np.empty((n, V), dtype=np.float32)
            for i, p in enumerate(ptrs):
                ctypes.memmove(out[start + i].ctypes.data, p, 4 * V)
        return out

    # generation
    def _sampler(self, temperature=None, top_k=None, top_p=None, min_p=None, repetition_penalty=None,
                 presence_penalty=None, frequency_penalty=None, penalty_last_n=None, seed=None):
        s = lib.td_model_sampler_defaults(self._ptr())  # each argument given overrides the model's own value
        for name, v in (("temperature", temperature), ("top_k", top_k), ("top_p", top_p), ("min_p", min_p),
                        ("repetition_penalty", repetition_penalty), ("presence_penalty", presence_penalty),
                        ("frequency_penalty", frequency_penalty), ("penalty_last_n", penalty_last_n),
                        ("seed", seed)):
            if v is not None:
                setattr(s, name, v)
        _check(lib.td_sampler_params_check(byref(s)))
        return s

    def _generation(self, gen, ids, max_tokens, *, stop=None, ignore_eos=False, logprobs=None, cache=False,
                    on_done=None, **sampling):
        return Generation(self, gen, ids, max_tokens, self._sampler(**sampling), stop, ignore_eos, logprobs,
                          cache, on_done)

    def generate(self, prompt=None, *, ids=None, max_tokens=32, chat=False, think=False, allow_special=False,
                 stop=None, ignore_eos=False, logprobs=None, threads=None, kv=None, **sampling):
        """Continues ``prompt`` (text, added tokens recognised) or ``ids``; returns a Generation, an iterator of
        Tokens. With ``chat`` the prompt is one user turn in the model's chat template (thinking off unless
        ``think``; special-token text in it is plain text unless ``allow_special``, see chat). Sampling: the model's generation_config.json, overridden by temperature (0: greedy), top_k,
        top_p, min_p, repetition_penalty, presence_penalty, frequency_penalty, penalty_last_n, seed. Stops at the
        model's stop ids (unless ``ignore_eos``), at ``stop`` (a string or a list) or after ``max_tokens``. The
        tokens are those of ``typedecide generate`` with the same flags."""
        if (prompt is None) == (ids is None):
            raise InvalidArgumentError("generate: give exactly one of prompt and ids")
        if chat and prompt is None:
            raise InvalidArgumentError("generate: chat needs a prompt")
        if prompt is not None:  # as the tool reads --prompt: added tokens recognised, BOS where there is one
            ids = (self._render([{"role": "user", "content": prompt}], think, None, allow_special) if chat
                   else self.tokenize(prompt, special=True, add_bos=True))
        ids = _ids(ids, "generate")
        if ids.size == 0:
            raise InvalidArgumentError("generate: the prompt is empty")
        if not self.can_generate:
            raise StateError("%s: the output head was pruned to the option letters (slot map %s): the model can "
                             "decide but not generate" % (self.path, _str(lib.td_model_slot_map(self._ptr()))))
        gp = lib.td_gen_default_params()
        gp.n_ctx = ids.size + max_tokens + 1
        gp.cache_bytes = 2**63 - 1
        gp.max_sequences, gp.max_running = 2, 1
        gp.n_batch = min(ids.size, 256)
        gp.n_threads = threads or self.threads
        gp.kv_f16 = _kv_f16(kv or self.kv)
        gp.device, gp.precision = self._device, self._precision
        gen = _new(lib.td_gen_new, self._ptr(), byref(gp), free=lib.td_gen_free, deps=(self._h,))
        return self._generation(gen, ids, max_tokens, stop=stop, ignore_eos=ignore_eos, logprobs=logprobs,
                                **sampling)

    def _render(self, messages, think, tools, allow_special=False):
        """The ids of messages in the chat template (td_chat_tokenize): the template's special tokens as such, the
        messages' text as text unless allow_special."""
        msgs = (L.ChatMessage * max(1, len(messages)))()
        keep = []
        for i, m in enumerate(messages):
            if not isinstance(m, dict) or "role" not in m:
                raise InvalidArgumentError("messages[%d]: expected a dict with a role" % i)
            content = m.get("content")
            if isinstance(content, list):  # OpenAI's parts: the text parts, joined
                content = "".join(p.get("text", "") for p in content if p.get("type") == "text")
            calls = m.get("tool_calls")
            fields = [_text(m["role"]), _opt_text(content), _opt_text(m.get("reasoning_content")),
                      None if calls is None else _text(calls if isinstance(calls, str) else json.dumps(calls))]
            keep.append(fields)
            msgs[i].role, msgs[i].content, msgs[i].reasoning_content, msgs[i].tool_calls_json = fields
        cp = lib.td_chat_default_params()
        cp.enable_thinking = int(bool(think))
        tools_json = None if tools is None else _text(tools if isinstance(tools, str) else json.dumps(tools))
        cp.tools_json = tools_json
        ids, n = POINTER(c_int32)(), c_size_t()
        _check(lib.td_chat_tokenize(self._ptr(), msgs, len(messages), byref(cp),
                                    L.CHAT_ALLOW_SPECIAL if allow_special else 0, None, byref(ids), byref(n)))
        try:
            return ids[:n.value] if n.value else []
        finally:
            lib.td_free(ids)

    def chat(self, messages, *, max_tokens=256, think=False, tools=None, allow_special=False, **kw):
        """Replies to ``messages`` (OpenAI's list of {"role", "content", "reasoning_content", "tool_calls"} dicts,
        or one user message as a str), rendered with the model's chat template (tools: OpenAI's list); returns a
        Generation (keywords as for generate). Text inside the messages is tokenized as text, so that nobody can
        forge a turn by typing "<|im_start|>"; ``allow_special`` makes it Hugging Face's (trusted messages only).
        For a conversation that reuses the cache turn after turn, use Chat."""
        if isinstance(messages, str):
            messages = [{"role": "user", "content": messages}]
        ids = self._render(list(messages), think, tools, allow_special)
        return self.generate(ids=ids, max_tokens=max_tokens, **kw)

    def chat_session(self, **kw):
        """A Chat on this model (system, think, tools, memory_mb, threads, kv, sampling defaults)."""
        return Chat(self, **kw)

    # export
    def export(self, path, *, quant="f16", embed_quant=None, prune_letters=None, name=None):
        """Writes the model as a GGUF file llama.cpp loads: weights at ``quant`` ("f32", "f16", "bf16", "q8_0",
        "q4_0"), the embedding at ``embed_quant`` (default: quant), the head pruned to ``prune_letters`` (e.g.
        "ABCD"; then the SlotMap is returned, else None)."""
        ep = lib.td_export_default_params()
        keep = [_text(quant), _opt_text(embed_quant), _opt_text(prune_letters), _opt_text(name)]
        ep.quant, ep.embed_quant, ep.prune_letters, ep.name = keep
        out = c_void_p()
        _check(lib.td_model_export_gguf(self._ptr(), byref(ep), _path(path), byref(out)))
        s = L.take_string(out.value)
        return None if s is None else SlotMap.from_json(s.decode("utf-8"))
