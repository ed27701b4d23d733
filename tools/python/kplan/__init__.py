"""kplan's Python binding: ctypes over libkplan.so (the C API, runtime/include/kplan/kplan.h).

    import kplan
    model = kplan.Model("model.kplan")                 # GPU when present, else the CPU reference
    out = model.generate("def f(x):", max_new=32, spec="ddtree", temperature=0.7, seed=1)
    print(out.text, out.tokens, out.stats["tokens_per_second"])
    for piece in model.stream("def f(x):", max_new=32):  # token by token
        print(piece.text, end="", flush=True)

The options are `kplan run`'s (README "The CLI"): spec none|dflash|ddtree, budget (int or "auto"),
drafter dflash|oracle|random, temperature, seed (None: random), top_k, top_p, min_p,
repetition_penalty, frequency_penalty, presence_penalty, stop (strings), ignore_eos. A model is a
compiled .kplan plan (a checkpoint directory needs the compiler: `kplan compile --model DIR -o`).

The library is found at $KPLAN_LIBRARY, else beside this package in an install prefix
(<prefix>/lib/libkplan.so), else by the system's loader (ctypes.util.find_library).
"""
import ctypes
import ctypes.util
import os
import queue
import random
import threading
from dataclasses import dataclass, field

__all__ = ["Error", "Model", "Generation", "Piece", "version", "library_path"]


class Error(RuntimeError):
    """A failed kplan call; the message is the runtime's one line (kplan_error_last)."""


def library_path():
    env = os.environ.get("KPLAN_LIBRARY")
    if env:
        return env
    here = os.path.dirname(os.path.abspath(__file__))
    # Installed: <prefix>/lib/python3/dist-packages/kplan, the library in <prefix>/lib[/<multiarch>].
    lib = os.path.normpath(os.path.join(here, "..", "..", ".."))
    candidates = [os.path.join(lib, "libkplan.so")]
    if os.path.isdir(lib):
        candidates += [os.path.join(lib, d, "libkplan.so") for d in sorted(os.listdir(lib))]
    for candidate in candidates:
        if os.path.exists(candidate):
            return candidate
    found = ctypes.util.find_library("kplan")
    if not found:
        raise Error("libkplan.so not found: set KPLAN_LIBRARY to its path (build/lib/libkplan.so in a build tree)")
    return found


# ---- the C structs (field for field as kplan.h; ctypes lays them out as C does) ----
class _PlanOpenOptions(ctypes.Structure):
    _fields_ = [("verify_weights", ctypes.c_int32)]


class _PlanInfo(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_uint32), ("format_version", ctypes.c_uint32),
                ("vocab_size", ctypes.c_int64), ("hidden_size", ctypes.c_int64), ("num_layers", ctypes.c_int64),
                ("max_tokens_per_step", ctypes.c_int64), ("max_tree_nodes", ctypes.c_int64),
                ("max_context", ctypes.c_int64), ("weight_bytes", ctypes.c_uint64),
                ("decode_read_bytes", ctypes.c_uint64), ("kv_bytes_per_token", ctypes.c_uint64),
                ("num_archs", ctypes.c_int32), ("archs", (ctypes.c_char * 16) * 8),
                ("has_drafter", ctypes.c_int32), ("draft_block_size", ctypes.c_int32),
                ("has_tokenizer", ctypes.c_int32)]


class _ModelOptions(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_uint32), ("device", ctypes.c_int32)]


class _SessionOptions(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_uint32), ("use_graphs", ctypes.c_int32),
                ("max_context", ctypes.c_int64), ("max_step_tokens", ctypes.c_int64)]


_TOKEN_CALLBACK = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_int32)


class _GenerateOptions(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_uint32), ("spec", ctypes.c_int32), ("drafter", ctypes.c_int32),
                ("budget", ctypes.c_int32), ("max_new", ctypes.c_int32), ("temperature", ctypes.c_double),
                ("seed", ctypes.c_uint64), ("stop_at_eos", ctypes.c_int32), ("draft_depth", ctypes.c_int32),
                ("oracle_accuracy", ctypes.c_double), ("oracle_continuation", ctypes.POINTER(ctypes.c_int32)),
                ("oracle_continuation_length", ctypes.c_int32), ("top_k", ctypes.c_int32),
                ("top_p", ctypes.c_double), ("min_p", ctypes.c_double), ("repetition_penalty", ctypes.c_double),
                ("frequency_penalty", ctypes.c_double), ("presence_penalty", ctypes.c_double),
                ("stop_strings", ctypes.POINTER(ctypes.c_char_p)), ("n_stop_strings", ctypes.c_int32),
                ("on_token", _TOKEN_CALLBACK), ("on_token_user_data", ctypes.c_void_p)]


_BINS = 32


class _GenerateStats(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_uint32), ("prompt_tokens", ctypes.c_int64),
                ("generated_tokens", ctypes.c_int64), ("prefill_steps", ctypes.c_int64), ("rounds", ctypes.c_int64),
                ("committed_in_rounds", ctypes.c_int64), ("tree_nodes", ctypes.c_int64),
                ("target_forwards", ctypes.c_int64), ("mean_acceptance_length", ctypes.c_double),
                ("stopped_at_context", ctypes.c_int32), ("seconds_prefill", ctypes.c_double),
                ("seconds_draft", ctypes.c_double), ("seconds_tree_build", ctypes.c_double),
                ("seconds_verify", ctypes.c_double), ("seconds_walk_commit", ctypes.c_double),
                ("acceptance_histogram", ctypes.c_int64 * _BINS), ("seconds_rounds", ctypes.c_double),
                ("seconds_device_wait", ctypes.c_double), ("device_rounds", ctypes.c_int32),
                ("stop_reason", ctypes.c_int32)]


_SPEC = {"none": 0, "dflash": 1, "ddtree": 2}
_DRAFTER = {"dflash": 0, "oracle": 1, "random": 2}
_DEVICE = {"auto": 0, "gpu": 1, "cpu": 2}
_STOP_REASON = {0: "max-new", 1: "eos", 2: "stop string", 3: "context full", 4: "callback"}

_lib = None
_lib_lock = threading.Lock()


def _load():
    global _lib
    with _lib_lock:
        if _lib is not None:
            return _lib
        lib = ctypes.CDLL(library_path())
        P = ctypes.c_void_p
        sigs = {
            "kplan_error_last": (ctypes.c_char_p, []),
            "kplan_version": (ctypes.c_char_p, []),
            "kplan_plan_open": (ctypes.c_int, [ctypes.c_char_p, ctypes.POINTER(_PlanOpenOptions), ctypes.POINTER(P)]),
            "kplan_plan_close": (None, [P]),
            "kplan_plan_info_get": (ctypes.c_int, [P, ctypes.POINTER(_PlanInfo)]),
            "kplan_plan_eos_ids_get": (ctypes.c_int32, [P, ctypes.POINTER(ctypes.c_int64), ctypes.c_int32]),
            "kplan_tokenizer_encode": (ctypes.c_int, [P, ctypes.c_char_p, ctypes.c_size_t,
                                                      ctypes.POINTER(ctypes.c_int32), ctypes.c_int32,
                                                      ctypes.POINTER(ctypes.c_int32)]),
            "kplan_tokenizer_decode": (ctypes.c_int, [P, ctypes.POINTER(ctypes.c_int32), ctypes.c_int32,
                                                      ctypes.c_char_p, ctypes.c_size_t,
                                                      ctypes.POINTER(ctypes.c_size_t)]),
            "kplan_plan_chat_template": (ctypes.c_char_p, [P]),
            "kplan_chat_template_apply": (ctypes.c_int, [P, ctypes.c_char_p, ctypes.c_int32, ctypes.c_char_p,
                                                         ctypes.c_size_t, ctypes.POINTER(ctypes.c_size_t)]),
            "kplan_model_options_init": (None, [ctypes.POINTER(_ModelOptions)]),
            "kplan_model_create": (ctypes.c_int, [P, ctypes.POINTER(_ModelOptions), ctypes.POINTER(P)]),
            "kplan_model_destroy": (None, [P]),
            "kplan_session_options_init": (None, [ctypes.POINTER(_SessionOptions)]),
            "kplan_session_create": (ctypes.c_int, [P, ctypes.POINTER(_SessionOptions), ctypes.POINTER(P)]),
            "kplan_session_destroy": (None, [P]),
            "kplan_session_device": (ctypes.c_int, [P]),
            "kplan_session_max_context": (ctypes.c_int64, [P]),
            "kplan_generate_options_init": (None, [ctypes.POINTER(_GenerateOptions)]),
            "kplan_session_generate": (ctypes.c_int, [P, ctypes.POINTER(ctypes.c_int32), ctypes.c_int32,
                                                      ctypes.POINTER(_GenerateOptions), ctypes.POINTER(ctypes.c_int32),
                                                      ctypes.c_int32, ctypes.POINTER(ctypes.c_int32),
                                                      ctypes.POINTER(_GenerateStats)]),
        }
        for name, (res, args) in sigs.items():
            fn = getattr(lib, name)
            fn.restype = res
            fn.argtypes = args
        _lib = lib
        return lib


def _check(status):
    if status != 0:
        raise Error(_load().kplan_error_last().decode("utf-8", "replace"))


def version():
    """The runtime's version, e.g. "0.1.0"."""
    return _load().kplan_version().decode()


@dataclass
class Generation:
    tokens: list            # the new token ids (EOS included when it ended the decode)
    text: str               # their text ("" without a tokenizer), cut where a stop string begins
    stop_reason: str        # max-new, eos, stop string, context full
    seed: int               # the seed used (random unless given)
    stats: dict = field(default_factory=dict)  # kplan_generate_stats' figures, wall time, tokens/s


@dataclass
class Piece:
    token: int
    text: str  # the token's text ("" without a tokenizer; a UTF-8 character split over tokens
               # arrives with its last token)


class Model:
    """A compiled plan loaded on one device (weights uploaded once), with one session."""

    def __init__(self, plan, device="auto", max_context=0, verify_weights=True):
        lib = _load()
        if device not in _DEVICE:
            raise Error("device must be auto, cpu or gpu (got %r)" % (device,))
        if os.path.isdir(plan):
            raise Error("Model(%r): a checkpoint directory needs the compiler; compile a plan first: "
                        "kplan compile --model DIR -o model.kplan" % (plan,))
        self._plan = ctypes.c_void_p()
        self._model = ctypes.c_void_p()
        self._session = ctypes.c_void_p()
        self._lock = threading.Lock()
        _check(lib.kplan_plan_open(os.fsencode(plan), ctypes.byref(_PlanOpenOptions(1 if verify_weights else 0)),
                                   ctypes.byref(self._plan)))
        info = _PlanInfo()
        info.struct_size = ctypes.sizeof(_PlanInfo)
        _check(lib.kplan_plan_info_get(self._plan, ctypes.byref(info)))
        self.info = {name: getattr(info, name) for name, _ in _PlanInfo._fields_ if name not in ("archs", "struct_size")}
        self.info["archs"] = [info.archs[i].value.decode() for i in range(info.num_archs)]
        if max_context and self.info["max_context"] and max_context > self.info["max_context"]:
            raise Error("max_context %d is past the plan's context of %d positions (compile the plan with "
                        "--max-context %d)" % (max_context, self.info["max_context"], max_context))
        mo = _ModelOptions()
        lib.kplan_model_options_init(ctypes.byref(mo))
        mo.device = _DEVICE[device]
        _check(lib.kplan_model_create(self._plan, ctypes.byref(mo), ctypes.byref(self._model)))
        so = _SessionOptions()
        lib.kplan_session_options_init(ctypes.byref(so))
        so.max_context = int(max_context)
        _check(lib.kplan_session_create(self._model, ctypes.byref(so), ctypes.byref(self._session)))
        n = lib.kplan_plan_eos_ids_get(self._plan, None, 0)
        eos = (ctypes.c_int64 * max(n, 1))()
        lib.kplan_plan_eos_ids_get(self._plan, eos, n)
        self.eos_ids = list(eos[:n])

    def close(self):
        lib = _load()
        if self._session:
            lib.kplan_session_destroy(self._session)
            self._session = ctypes.c_void_p()
        if self._model:
            lib.kplan_model_destroy(self._model)
            self._model = ctypes.c_void_p()
        if self._plan:
            lib.kplan_plan_close(self._plan)
            self._plan = ctypes.c_void_p()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    @property
    def device(self):
        return "gpu" if _load().kplan_session_device(self._session) == 1 else "cpu"

    @property
    def max_context(self):
        return _load().kplan_session_max_context(self._session)

    @property
    def has_tokenizer(self):
        return bool(self.info["has_tokenizer"])

    def encode(self, text):
        lib = _load()
        data = text.encode("utf-8") if isinstance(text, str) else bytes(text)
        n = ctypes.c_int32(0)
        lib.kplan_tokenizer_encode(self._plan, data, len(data), None, 0, ctypes.byref(n))
        ids = (ctypes.c_int32 * max(n.value, 1))()
        _check(lib.kplan_tokenizer_encode(self._plan, data, len(data), ids, n.value, ctypes.byref(n)))
        return list(ids[:n.value])

    def decode_bytes(self, ids):
        lib = _load()
        arr = (ctypes.c_int32 * max(len(ids), 1))(*ids)
        length = ctypes.c_size_t(0)
        lib.kplan_tokenizer_decode(self._plan, arr, len(ids), None, 0, ctypes.byref(length))
        buf = ctypes.create_string_buffer(max(length.value, 1))
        _check(lib.kplan_tokenizer_decode(self._plan, arr, len(ids), buf, length.value, ctypes.byref(length)))
        return buf.raw[:length.value]

    def decode(self, ids):
        return self.decode_bytes(ids).decode("utf-8", "replace")

    @property
    def chat_template(self):
        """The checkpoint's chat template the plan carries ("" when none)."""
        return _load().kplan_plan_chat_template(self._plan).decode("utf-8")

    def apply_chat_template(self, messages, add_generation_prompt=True, **variables):
        """A conversation (a list of {"role", "content"} dicts) rendered to prompt text with the plan's chat
        template, as transformers' apply_chat_template(tokenize=False) renders it; `variables` (e.g. tools=[...])
        are passed to the template. Generate from it with generate(text) (its turn markers become special ids)."""
        import json
        lib = _load()
        conv = dict(variables, messages=messages) if variables else messages
        data = json.dumps(conv, ensure_ascii=False).encode("utf-8")
        length = ctypes.c_size_t(0)
        gen = 1 if add_generation_prompt else 0
        if lib.kplan_chat_template_apply(self._plan, data, gen, None, 0, ctypes.byref(length)) != 0 and length.value == 0:
            _check(1)
        buf = ctypes.create_string_buffer(length.value + 1)
        _check(lib.kplan_chat_template_apply(self._plan, data, gen, buf, length.value + 1, ctypes.byref(length)))
        return buf.raw[:length.value].decode("utf-8")

    def _prompt_ids(self, prompt):
        if isinstance(prompt, str):
            if not self.has_tokenizer:
                raise Error("no tokenizer: the plan carries no tiktoken data; give the prompt as token ids")
            return self.encode(prompt)
        return [int(t) for t in prompt]

    def _options(self, max_new, spec, budget, drafter, temperature, seed, top_k, top_p, min_p, repetition_penalty,
                 frequency_penalty, presence_penalty, stop, ignore_eos):
        lib = _load()
        o = _GenerateOptions()
        lib.kplan_generate_options_init(ctypes.byref(o))
        if spec not in _SPEC:
            raise Error("spec must be none, dflash or ddtree (got %r)" % (spec,))
        if drafter not in _DRAFTER:
            raise Error("drafter must be dflash, oracle or random (got %r)" % (drafter,))
        o.spec = _SPEC[spec]
        o.drafter = _DRAFTER[drafter]
        o.budget = -1 if budget == "auto" else int(budget)
        o.max_new = int(max_new)
        o.temperature = float(temperature)
        o.seed = random.getrandbits(64) if seed is None else int(seed)
        o.stop_at_eos = 0 if ignore_eos else 1
        o.top_k = int(top_k)
        o.top_p = float(top_p)
        o.min_p = float(min_p)
        o.repetition_penalty = float(repetition_penalty)
        o.frequency_penalty = float(frequency_penalty)
        o.presence_penalty = float(presence_penalty)
        stops = [stop] if isinstance(stop, str) else list(stop or [])
        keep = None
        if stops:
            keep = (ctypes.c_char_p * len(stops))(*[s.encode("utf-8") for s in stops])
            o.stop_strings = keep
            o.n_stop_strings = len(stops)
        return o, stops, keep

    def _run(self, prompt, options, on_token=None):
        lib = _load()
        ids = self._prompt_ids(prompt)
        arr = (ctypes.c_int32 * max(len(ids), 1))(*ids)
        out = (ctypes.c_int32 * max(options.max_new, 1))()
        n = ctypes.c_int32(0)
        stats = _GenerateStats()
        stats.struct_size = ctypes.sizeof(_GenerateStats)
        callback = _TOKEN_CALLBACK(on_token) if on_token else _TOKEN_CALLBACK()
        options.on_token = callback
        import time
        start = time.perf_counter()
        with self._lock:  # one generate at a time on the model's session
            status = lib.kplan_session_generate(self._session, arr, len(ids), ctypes.byref(options), out,
                                                options.max_new, ctypes.byref(n), ctypes.byref(stats))
        wall = time.perf_counter() - start
        _check(status)
        figures = {name: getattr(stats, name) for name, _ in _GenerateStats._fields_
                   if name not in ("struct_size", "acceptance_histogram")}
        figures["acceptance_histogram"] = list(stats.acceptance_histogram)
        figures["wall_seconds"] = wall
        figures["tokens_per_second"] = stats.generated_tokens / wall if wall > 0 else 0.0
        figures["stop_reason"] = _STOP_REASON.get(stats.stop_reason, str(stats.stop_reason))
        return list(out[:n.value]), figures

    def generate(self, prompt, max_new=16, spec="none", budget=16, drafter="dflash", temperature=0.0, seed=None,
                 top_k=0, top_p=1.0, min_p=0.0, repetition_penalty=1.0, frequency_penalty=0.0,
                 presence_penalty=0.0, stop=None, ignore_eos=False):
        """Decodes `prompt` (text, or a list of token ids) and returns a Generation."""
        options, stops, _keep = self._options(max_new, spec, budget, drafter, temperature, seed, top_k, top_p, min_p,
                                              repetition_penalty, frequency_penalty, presence_penalty, stop,
                                              ignore_eos)
        tokens, figures = self._run(prompt, options)
        text = ""
        if self.has_tokenizer:
            text = self.decode_bytes(tokens).decode("utf-8", "replace")
            cuts = [text.find(s) for s in stops if s in text]
            if cuts:
                text = text[:min(cuts)]
        return Generation(tokens, text, figures["stop_reason"], options.seed, figures)

    def stream(self, prompt, **options):
        """Yields a Piece per token as the decode emits it (the same options as generate). With stop
        strings the decode ends at the token that completes one, and that token's piece is yielded
        too: the text is not cut (generate's is). Leaving the loop early ends the decode."""
        o, _stops, keep = self._options(**_stream_defaults(options))
        pieces = queue.Queue()
        done = object()
        pending = bytearray()
        abandoned = threading.Event()  # the reader stopped early: end the decode too

        def on_token(_user, token):
            pieces.put(token)
            return 1 if abandoned.is_set() else 0

        def worker():
            try:
                self._run(prompt, o, on_token)
                pieces.put(done)
            except BaseException as e:  # handed to the reader
                pieces.put(e)

        thread = threading.Thread(target=worker, daemon=True)
        thread.start()
        try:
            while True:
                item = pieces.get()
                if item is done:
                    break
                if isinstance(item, BaseException):
                    raise item
                text = ""
                if self.has_tokenizer:
                    pending.extend(self.decode_bytes([item]))
                    try:
                        text = pending.decode("utf-8")
                        pending.clear()
                    except UnicodeDecodeError:
                        if len(pending) > 8:
                            text = pending.decode("utf-8", "replace")
                            pending.clear()
                yield Piece(item, text)
        finally:
            abandoned.set()
            thread.join()
            del keep


def _stream_defaults(options):
    names = ["max_new", "spec", "budget", "drafter", "temperature", "seed", "top_k", "top_p", "min_p",
             "repetition_penalty", "frequency_penalty", "presence_penalty", "stop", "ignore_eos"]
    defaults = dict(max_new=16, spec="none", budget=16, drafter="dflash", temperature=0.0, seed=None, top_k=0,
                    top_p=1.0, min_p=0.0, repetition_penalty=1.0, frequency_penalty=0.0, presence_penalty=0.0,
                    stop=None, ignore_eos=False)
    unknown = set(options) - set(names)
    if unknown:
        raise TypeError("unknown option(s): " + ", ".join(sorted(unknown)))
    defaults.update(options)
    return {k: defaults[k] for k in names}
