"""Attention time for a whole model's forward (prefill, decode) or training step: model presets (YAML files of a
model's attention geometry, each citing its published config.json) and ``llm()``, which prices every layer's
attention with ``perfmodel.predict``. Pure: nothing here prints.

    >>> import perfmodel
    >>> r = perfmodel.llm(model="llama-3.1-8b", gpu=["h100", "h200"], batch=8, prompt=8192)
    >>> [(e.gpu, e.kernel, e.per_step_s) for e in r.estimates if e.supported]
    >>> r.to_dict()                                  # what `perfmodel llm --json` prints

Only attention is priced: the projections, the MLP (or a mixture of experts), norms and sampling of a model step
are not. Presets are found by name (built in: perfmodel/models/; then $PERFMODEL_MODEL_PATH and
~/.config/perfmodel/models) or by path.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path

from perfmodel.errors import InputError, read_yaml

PHASES = ("prefill", "decode", "train")
MAX_LAYERS = 100_000
ATTENTION_ONLY = ("attention alone: the projections, MLP or experts, norms and the rest of the model step are not "
                  "priced")

# field -> (type, required)
_SCHEMA = {
    "name": (str, True), "display": (str, False), "aliases": (list, False),
    "layers": (int, True), "heads": (int, True), "kv_heads": (int, True), "head_dim": (int, True),
    "sliding_window": (int, False), "window_layers": (object, False), "logit_softcap": (float, False),
    "attention": (str, False), "source": (dict, False), "notes": (list, False),
}
_ATTENTION = {"mha", "gqa", "mqa"}
# fields that declare an architecture one line of (layers, heads, kv_heads, head_dim, window) cannot express
_REFUSED = {
    "kv_sharing": "cross-layer K/V sharing (layers reading another layer's cache)",
    "cross_layer_kv": "cross-layer K/V sharing (layers reading another layer's cache)",
    "kv_lora_rank": "multi-head latent attention (K/V compressed to a latent)",
    "per_layer_heads": "a different head count per layer",
}
_SOURCE_KEYS = {"url", "fields", "head_dim_from", "checked"}
# source.fields -> the preset field it must equal
_CITED = {"num_hidden_layers": "layers", "num_attention_heads": "heads", "num_key_value_heads": "kv_heads",
          "head_dim": "head_dim", "sliding_window": "sliding_window"}


@dataclass(frozen=True)
class ModelPreset:
    """A model's attention geometry. ``window_layers``: the layer indices (0-based) a sliding window applies to."""

    key: str
    path: str
    name: str
    display: str
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    sliding_window: int | None = None
    window_layers: tuple = ()
    logit_softcap: float | None = None
    aliases: tuple = ()
    source: dict = field(default_factory=dict)
    notes: tuple = ()

    def layer_groups(self) -> list[tuple[int, int | None]]:
        """(layers, window or None) for the layers that share one attention shape."""
        windowed = len(self.window_layers) if self.sliding_window else 0
        groups = [(self.layers - windowed, None), (windowed, self.sliding_window)]
        return [g for g in groups if g[0] > 0]

    def to_dict(self) -> dict:
        return {"key": self.key, "name": self.display, "layers": self.layers, "heads": self.heads,
                "kv_heads": self.kv_heads, "head_dim": self.head_dim, "sliding_window": self.sliding_window,
                "window_layers": list(self.window_layers), "logit_softcap": self.logit_softcap,
                "source": self.source.get("url"), "path": self.path}


# --- files ------------------------------------------------------------------------------------------------------
def builtin_dir() -> Path:
    return Path(__file__).resolve().parent / "models"


def user_dirs() -> list[Path]:
    """Folders searched for users' presets, after the built-in ones: $PERFMODEL_MODEL_PATH (separated by ':'), then
    ~/.config/perfmodel/models (or $XDG_CONFIG_HOME/perfmodel/models)."""
    dirs = [Path(p) for p in os.environ.get("PERFMODEL_MODEL_PATH", "").split(os.pathsep) if p]
    config = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    return dirs + [config / "perfmodel" / "models"]


def builtin_models() -> dict[str, Path]:
    return {p.stem: p for p in sorted(builtin_dir().glob("*.yaml"))}


def all_models() -> dict[str, Path]:
    """Stem -> path of every preset a name can refer to: users' first, a built-in name winning over theirs."""
    out: dict = {}
    for d in user_dirs():
        if d.is_dir():
            for p in sorted(d.glob("*.yaml")):
                out.setdefault(p.stem, p)
    out.update(builtin_models())
    return out


def _positive(where, name, v, typ=int):
    if isinstance(v, bool) or not isinstance(v, (int, float)) or (typ is int and not isinstance(v, int)):
        raise InputError(f"{where}: field '{name}' must be a positive {'integer' if typ is int else 'number'}, "
                         f"got {v!r}")
    if not (v > 0 and math.isfinite(v)) or (typ is int and v > MAX_LAYERS * 1000):
        raise InputError(f"{where}: field '{name}' must be a positive number, got {v!r}")
    return typ(v)


def _window_layers(where, spec, layers: int) -> tuple:
    if spec in (None, "all"):
        return tuple(range(layers))
    if spec in ("even", "odd"):
        return tuple(range(0 if spec == "even" else 1, layers, 2))
    if isinstance(spec, list) and spec and all(isinstance(i, int) and not isinstance(i, bool) for i in spec):
        if any(i < 0 or i >= layers for i in spec) or len(set(spec)) != len(spec):
            raise InputError(f"{where}: field 'window_layers' lists a layer outside 0..{layers - 1}, or one twice")
        return tuple(sorted(spec))
    raise InputError(f"{where}: field 'window_layers' must be all, even, odd or a list of layer indices, "
                     f"got {spec!r}")


def _check_source(where, src: dict, v: dict) -> None:
    unknown = sorted(set(src) - _SOURCE_KEYS)
    if unknown:
        raise InputError(f"{where}: unknown field 'source.{unknown[0]}'")
    if "url" in src and not (isinstance(src["url"], str) and src["url"].startswith("https://")):
        raise InputError(f"{where}: field 'source.url' must be an https:// address")
    fields = src.get("fields") or {}
    if not isinstance(fields, dict):
        raise InputError(f"{where}: field 'source.fields' must map config.json's field names to their values")
    for cfg, ours in _CITED.items():
        if cfg in fields and fields[cfg] != v.get(ours):
            raise InputError(f"{where}: field '{ours}' is {v.get(ours)!r} but the cited config's {cfg} is "
                             f"{fields[cfg]!r}")
    if "hidden_size" in fields and "num_attention_heads" in fields and src.get("head_dim_from", "").startswith(
            "hidden_size"):
        derived = fields["hidden_size"] / fields["num_attention_heads"]
        if derived != v["head_dim"]:
            raise InputError(f"{where}: field 'head_dim' is {v['head_dim']} but hidden_size / num_attention_heads "
                             f"is {derived:g}")


def validate(raw, where: str) -> dict:
    """The checked fields of one preset file (one-line InputError naming the file and the field)."""
    if not isinstance(raw, dict):
        raise InputError(f"{where}: expected a mapping of fields, got {type(raw).__name__}")
    if str(raw.get("attention", "")).strip().lower() == "mla":
        raise InputError(f"{where}: field 'attention' is mla (multi-head latent attention): its K/V are a shared "
                         f"latent expanded per head, which no (heads, kv_heads, head_dim) of these kernels expresses")
    for k, why in _REFUSED.items():
        if raw.get(k) not in (None, False, "none", 0):
            raise InputError(f"{where}: field '{k}' declares {why}, which these kernel models cannot express")
    unknown = sorted(set(raw) - set(_SCHEMA))
    if unknown:
        raise InputError(f"{where}: unknown field '{unknown[0]}'")
    v: dict = {}
    for name, (typ, required) in _SCHEMA.items():
        val = raw.get(name)
        if val is None:
            if required:
                raise InputError(f"{where}: missing field '{name}'")
            continue
        if typ is int or typ is float:
            val = _positive(where, name, val, typ)
        elif typ is not object and not isinstance(val, typ):
            raise InputError(f"{where}: field '{name}' must be a {typ.__name__}, got {type(val).__name__}")
        v[name] = val
    if v["layers"] > MAX_LAYERS:
        raise InputError(f"{where}: field 'layers' is {v['layers']}: more than {MAX_LAYERS}")
    if "attention" in v and v["attention"].lower() not in _ATTENTION:
        raise InputError(f"{where}: field 'attention' must be one of {', '.join(sorted(_ATTENTION))} (mla and other "
                         f"kinds are not expressible), got {v['attention']!r}")
    if v["heads"] % v["kv_heads"]:
        raise InputError(f"{where}: field 'kv_heads' ({v['kv_heads']}) must divide heads ({v['heads']})")
    att = v.get("attention", "").lower()
    if (att == "mha" and v["kv_heads"] != v["heads"]) or (att == "mqa" and v["kv_heads"] != 1):
        raise InputError(f"{where}: field 'attention' is {att} but kv_heads is {v['kv_heads']} of {v['heads']}")
    if "window_layers" in v and "sliding_window" not in v:
        raise InputError(f"{where}: field 'window_layers' without a sliding_window")
    v["window_layers"] = (_window_layers(where, raw.get("window_layers"), v["layers"])
                          if "sliding_window" in v else ())
    if any(not isinstance(a, str) for a in v.get("aliases", [])):
        raise InputError(f"{where}: field 'aliases' must be a list of names")
    if any(not isinstance(n, str) for n in v.get("notes", [])):
        raise InputError(f"{where}: field 'notes' must be a list of sentences")
    _check_source(where, v.get("source") or {}, v)
    return v


def load_preset_file(path) -> ModelPreset:
    path = Path(path)
    v = validate(read_yaml(path, "model preset file"), str(path))
    return ModelPreset(key=path.stem, path=str(path), name=v["name"], display=v.get("display", v["name"]),
                       layers=v["layers"], heads=v["heads"], kv_heads=v["kv_heads"], head_dim=v["head_dim"],
                       sliding_window=v.get("sliding_window"), window_layers=v["window_layers"],
                       logit_softcap=v.get("logit_softcap"), aliases=tuple(v.get("aliases", ())),
                       source=dict(v.get("source") or {}), notes=tuple(" ".join(n.split()) for n in v.get("notes", ())))


def resolve(name_or_path) -> ModelPreset:
    """A preset by name or alias (built in, or in a folder on $PERFMODEL_MODEL_PATH), by YAML path, or as given."""
    if isinstance(name_or_path, ModelPreset):
        return name_or_path
    if not isinstance(name_or_path, str) or not name_or_path.strip():
        raise InputError(f"a model is a preset name or a YAML path, got {name_or_path!r}")
    key = name_or_path.strip().lower()
    models = all_models()
    if key in models:
        return load_preset_file(models[key])
    p = Path(name_or_path)
    if p.suffix in (".yaml", ".yml") or p.exists():
        return load_preset_file(p)
    for stem, path in models.items():           # aliases: only read when the name is not a file stem
        try:
            raw = read_yaml(path, "model preset file")
        except InputError:
            continue
        if isinstance(raw, dict) and key in [str(a).lower() for a in raw.get("aliases") or []]:
            return load_preset_file(path)
    raise InputError(f"unknown model '{name_or_path}'; known: {', '.join(builtin_models())} (or a YAML file; "
                     f"docs/llm.md says how to write one)")


# --- measured ranges ----------------------------------------------------------------------------------------------
RANGES = Path(__file__).resolve().parent / "evaluation" / "measured_ranges.json"
_RANGES: dict = {}


def measured_ranges() -> dict:
    """kernel -> gpu key -> pass ("fwd" or "bwd") -> {Nq, Nk, d, BH: [lo, hi], rows} (examples/measured_ranges.py)."""
    if not _RANGES:
        import json

        _RANGES.update(json.loads(RANGES.read_text()) if RANGES.exists() else {})
    return _RANGES


def outside_measured(kernel: str, gpu_key: str, shape) -> list[str] | None:
    """The axes (Nq, Nk, d, B*H) where ``shape`` lies outside what was measured for this kernel, GPU and pass; None
    where nothing was measured there."""
    by_pass = measured_ranges().get(kernel, {}).get(gpu_key, {})
    r = by_pass.get("fwd" if shape.mode == "fwd" else "bwd")
    if not r:
        return None
    vals = {"Nq": shape.Nq, "Nk": shape.Nk, "d": shape.d, "B*H": shape.B * shape.H}
    return [a for a, x in vals.items() if not (r[a.replace("*", "")][0] <= int(x) <= r[a.replace("*", "")][1])]


# --- the workload -------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Workload:
    phase: str
    batch: int
    prompt: int | None = None
    context: int | None = None
    new_tokens: int | None = None
    seq: int | None = None

    def to_dict(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if v is not None}


def workload(batch=None, prompt=None, context=None, new_tokens=None, train=False, seq=None) -> Workload:
    from perfmodel.shape import positive_int

    if batch is None:
        raise InputError("give the batch: --batch B (sequences run together)")
    given = [p for p, on in (("prompt", prompt is not None), ("decode", context is not None or new_tokens is not None),
                             ("train", bool(train) or seq is not None)) if on]
    if len(given) != 1:
        raise InputError("give one phase: --prompt N (prefill), --context N --new-tokens T (decode) or --train "
                         "--seq N" + (f"; got {' and '.join(given)}" if given else ""))
    batch = positive_int("batch", batch)
    if given[0] == "prompt":
        return Workload("prefill", batch, prompt=positive_int("prompt", prompt))
    if given[0] == "decode":
        if context is None or new_tokens is None:
            raise InputError("a decode needs both --context N (tokens already cached) and --new-tokens T")
        return Workload("decode", batch, context=positive_int("context", context),
                        new_tokens=positive_int("new-tokens", new_tokens))
    if not train or seq is None:
        raise InputError("a training step needs both --train and --seq N")
    return Workload("train", batch, seq=positive_int("seq", seq))


def layer_shapes(w: Workload, window: int | None) -> tuple[list[dict], str | None]:
    """The predict() calls one layer's attention takes (their times add), and a note where they approximate it.

    prefill: causal, Nq = Nk = prompt; decode: Nq = new tokens against Nk = context + new tokens, causal aligned
    bottom-right; train: causal, Nq = Nk = seq, forward and backward. A layer with a sliding window W sees at most W
    keys: a decode reads min(Nk, W) of them; a prefill or training step longer than W is priced as two calls, the
    first W queries (causal, W x W) and the other N - W queries against W keys each (Nq = N - W, Nk = W, no mask):
    the band's FLOPs exactly, though a windowed kernel runs one launch that streams each query tile's own keys."""
    if w.phase == "decode":
        nk = w.context + w.new_tokens
        note = None
        if window and nk > window:
            nk = window
            note = f"layers with a {window}-token window read its last {window} keys"
        return [dict(Nq=w.new_tokens, Nk=nk, causal=True, mode="fwd")], note
    n = w.prompt if w.phase == "prefill" else w.seq
    mode = "fwd" if w.phase == "prefill" else "fwd_bwd"
    if not window or n <= window:
        return [dict(Nq=n, Nk=n, causal=True, mode=mode)], None
    return ([dict(Nq=window, Nk=window, causal=True, mode=mode),
             dict(Nq=n - window, Nk=window, causal=False, mode=mode)],
            f"windowed layers ({window} keys) are priced as a causal {window}x{window} call plus a full "
            f"{n - window}x{window} one: the band's FLOPs, but two launches and the keys' reuse of a block, not a "
            f"sliding band")


# --- the estimate -------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class KernelEstimate:
    """One kernel on one GPU. ``supported`` False: ``reason`` says why (the others are None)."""

    gpu: str
    gpu_name: str
    kernel: str
    supported: bool
    reason: str | None = None
    per_layer_s: float | None = None          # step / layers (equal to each layer's where all layers are alike)
    per_step_s: float | None = None           # every layer's attention, summed
    tflops: float | None = None               # useful FLOP/s over the step
    gbps: float | None = None                 # the problem's tensors (Q, K, V, O; gradients in training) a second
    bound: str | None = None                  # the binding resource of the call that takes the most of the step
    accuracy: str | None = None               # short: "±4.4% (382 meas.)", "unmeasured", "outside measured Nq"
    accuracy_line: str | None = None          # report._accuracy_line's sentence
    outside: tuple = ()                       # axes outside the measured ranges
    groups: tuple = ()                        # per layer group: layers, window, per_layer_s, calls

    def to_dict(self) -> dict:
        d = dict(self.__dict__)
        d["outside"], d["groups"] = list(self.outside), list(self.groups)
        return d


@dataclass(frozen=True)
class LLMEstimate:
    model: ModelPreset
    workload: Workload
    dtype: str
    estimates: tuple
    skipped: tuple                            # (kernel, reason) for kernels that do not run the workload
    notes: tuple

    def fastest(self) -> dict:
        """gpu -> {kernel, per_step_s, next, next_s, ratio} (ratio: the next kernel's time over the fastest's)."""
        out = {}
        for g in dict.fromkeys(e.gpu for e in self.estimates):
            ok = sorted((e for e in self.estimates if e.gpu == g and e.supported), key=lambda e: e.per_step_s)
            if ok:
                nxt = ok[1] if len(ok) > 1 else None
                out[g] = {"kernel": ok[0].kernel, "per_step_s": ok[0].per_step_s,
                          "next": nxt.kernel if nxt else None, "next_s": nxt.per_step_s if nxt else None,
                          "ratio": nxt.per_step_s / ok[0].per_step_s if nxt else None}
        return out

    def to_dict(self) -> dict:
        return {"model": self.model.to_dict(), "phase": self.workload.phase, "workload": self.workload.to_dict(),
                "dtype": self.dtype, "covers": ATTENTION_ONLY,
                "estimates": [e.to_dict() for e in self.estimates],
                "skipped": [{"kernel": k, "reason": r} for k, r in self.skipped],
                "fastest": self.fastest(), "notes": list(self.notes)}


def short_accuracy(acc: dict, outside) -> str:
    if outside:
        return "outside measured " + ",".join(outside)
    here = acc.get("this_gpu")
    if not here or outside is None:
        return "unmeasured"
    return f"±{here['mape']:.1f}% ({here['rows']} meas.)"


def _estimate(spec, kernel: str, preset: ModelPreset, w: Workload, dtype: str, shapes_by_group) -> KernelEstimate:
    from perfmodel import api
    from perfmodel.evaluation import advice
    from perfmodel.report import _accuracy_line

    groups, step, flops, nbytes, worst, outside, measured = [], 0.0, 0.0, 0.0, (-1.0, None), [], True
    main_shape = None
    for (n_layers, window), calls in shapes_by_group:
        per_layer, done = 0.0, []
        for c in calls:
            r = api.predict(spec, kernel, B=w.batch, H=preset.heads, Hkv=preset.kv_heads, d=preset.head_dim,
                            dtype=dtype, **c)
            s = r.prediction.shape
            main_shape = s if main_shape is None else main_shape
            per_layer += r.time_s
            flops += n_layers * float(s.useful_flops())
            nbytes += n_layers * float(s.tensor_bytes())
            if n_layers * r.time_s > worst[0]:
                worst = (n_layers * r.time_s, r.bound)
            off = outside_measured(kernel, spec.key, s)
            if off is None:
                measured = False
            else:
                outside += [a for a in off if a not in outside]
            done.append(dict(c, time_s=r.time_s, bound=r.bound))
        step += n_layers * per_layer
        groups.append({"layers": n_layers, "window": window, "per_layer_s": per_layer, "calls": done})
    # the error measured on this phase's workload (decode, grouped prefill, fwd_bwd...), of the step's main shape
    acc = advice.measured_accuracy(kernel, spec.key, advice.workload_of(main_shape)) if main_shape is not None \
        else advice.measured_accuracy(kernel, spec.key)
    off = tuple(outside) if measured else None
    return KernelEstimate(gpu=spec.key, gpu_name=spec.name, kernel=kernel, supported=True,
                          per_layer_s=step / preset.layers, per_step_s=step, tflops=flops / step / 1e12,
                          gbps=nbytes / step / 1e9, bound=worst[1], accuracy=short_accuracy(acc, off),
                          accuracy_line=_accuracy_line(kernel, acc), outside=tuple(off or ()), groups=tuple(groups))


def llm(model, gpu="h100", batch=None, prompt=None, context=None, new_tokens=None, train=False, seq=None,
        kernel=None, dtype="bf16") -> LLMEstimate:
    """Attention time of every layer of ``model`` (a preset name, YAML path or ModelPreset) for one phase, on each
    GPU (a name or a list) and kernel (None: every registered kernel that runs the workload; the others are in
    ``skipped``). Phases: ``prompt=N`` (prefill), ``context=N, new_tokens=T`` (decode) or ``train=True, seq=N``."""
    from perfmodel import api
    from perfmodel.kernels import get as get_kernel, names
    from perfmodel.shape import make_shape, parse_dtype

    preset = resolve(model)
    w = workload(batch, prompt, context, new_tokens, train, seq)
    dtype = parse_dtype(dtype)
    gpus = [gpu] if isinstance(gpu, str) or not hasattr(gpu, "__iter__") else list(gpu)
    if not gpus:
        raise InputError("give at least one GPU")
    specs = list({s.key: s for s in (api.load_gpu(g) for g in gpus)}.values())
    asked = [kernel] if isinstance(kernel, str) else (list(dict.fromkeys(kernel)) if kernel else None)
    kernels = [get_kernel(k) for k in (asked or names())]
    shapes_by_group, notes = [], []
    for n_layers, window in preset.layer_groups():
        calls, note = layer_shapes(w, window)
        shapes_by_group.append(((n_layers, window), calls))
        if note:
            notes.append(note)
    notes += list(preset.notes)
    estimates, skipped = [], []
    for k in kernels:
        probe = make_shape(w.batch, preset.heads, None, preset.head_dim, dtype, True, Hkv=preset.kv_heads,
                           Nq=shapes_by_group[0][1][0]["Nq"], Nk=shapes_by_group[0][1][0]["Nk"],
                           mode=shapes_by_group[0][1][0]["mode"])
        lack = k.lacks(probe)
        if lack and not asked:
            skipped.append((k.name, lack))
            continue
        for spec in specs:
            if lack:
                estimates.append(KernelEstimate(gpu=spec.key, gpu_name=spec.name, kernel=k.name, supported=False,
                                                reason=lack))
                continue
            try:
                estimates.append(_estimate(spec, k.name, preset, w, dtype, shapes_by_group))
            except InputError as exc:                 # a missing backward model, a shape the GPU cannot hold, ...
                reason = str(exc)
                for prefix in (f"kernel {k.name}: ", f"kernel {k.name} ", f"{k.name}: "):
                    reason = reason.removeprefix(prefix)
                estimates.append(KernelEstimate(gpu=spec.key, gpu_name=spec.name, kernel=k.name, supported=False,
                                                reason=reason))
    # rows per GPU, in the order the GPUs were given
    order = {s.key: i for i, s in enumerate(specs)}
    estimates.sort(key=lambda e: order[e.gpu])
    return LLMEstimate(model=preset, workload=w, dtype=dtype, estimates=tuple(estimates), skipped=tuple(skipped),
                       notes=tuple(dict.fromkeys(notes)))
