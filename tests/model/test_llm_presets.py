"""Model presets (perfmodel/models/): every file loads, its geometry equals the published config.json it cites (the
table below is typed from those configs), bad files are one-line errors naming the file and the field, and
perfmodel.llm's per-layer figures are the sum of perfmodel.predict over the same shapes."""

import re
import math
from pathlib import Path

import pytest

import perfmodel
from perfmodel.errors import InputError
from perfmodel.llm import builtin_models, layer_shapes, load_preset_file, measured_ranges, resolve, workload

ROOT = Path(__file__).resolve().parents[2]

# (layers, heads, kv_heads, head_dim, sliding_window, windowed layers), typed from each model's config.json:
# num_hidden_layers, num_attention_heads, num_key_value_heads, head_dim or hidden_size / num_attention_heads,
# sliding_window (Gemma 2: every second layer, from layer 0)
CONFIGS = {
    "llama-3.1-8b": (32, 32, 8, 4096 // 32, None, 0),
    "llama-3.1-70b": (80, 64, 8, 8192 // 64, None, 0),
    "llama-3.1-405b": (126, 128, 8, 16384 // 128, None, 0),
    "mistral-7b-v0.1": (32, 32, 8, 4096 // 32, 4096, 32),
    "mixtral-8x7b": (32, 32, 8, 4096 // 32, None, 0),
    "qwen2.5-7b": (28, 28, 4, 3584 // 28, None, 0),
    "qwen2.5-72b": (80, 64, 8, 8192 // 64, None, 0),
    "gemma-2-9b": (42, 16, 8, 256, 4096, 21),
    "llama-2-7b": (32, 32, 32, 4096 // 32, None, 0),
}


def test_every_preset_is_in_the_table():
    assert set(builtin_models()) == set(CONFIGS)


@pytest.mark.parametrize("key", sorted(CONFIGS))
def test_preset_geometry_equals_its_cited_config(key):
    m = resolve(key)
    layers, heads, kv, d, window, n_windowed = CONFIGS[key]
    assert (m.layers, m.heads, m.kv_heads, m.head_dim, m.sliding_window, len(m.window_layers)) == \
        (layers, heads, kv, d, window, n_windowed)
    # the file cites its source and the fields it read, and those fields hold the same numbers
    src = m.source
    assert src["url"].startswith("https://huggingface.co/") and src["url"].endswith("/config.json")
    f = src["fields"]
    assert (f["num_hidden_layers"], f["num_attention_heads"], f["num_key_value_heads"]) == (layers, heads, kv)
    assert f.get("head_dim", f.get("hidden_size", 0) // f["num_attention_heads"]) == d
    assert f.get("sliding_window") == window
    assert src.get("checked"), "say what the numbers were checked against"


def test_gemma_windows_every_second_layer_from_the_first():
    assert resolve("gemma-2-9b").window_layers == tuple(range(0, 42, 2))
    assert resolve("mistral-7b").window_layers == tuple(range(32))      # by alias


def write(tmp_path, text, name="m.yaml"):
    p = tmp_path / name
    p.write_text(text)
    return p


GOOD = "name: tiny\nlayers: 2\nheads: 8\nkv_heads: 2\nhead_dim: 64\n"


@pytest.mark.parametrize("text, needle", [
    (GOOD + "attention: mla\n", "field 'attention' is mla"),
    (GOOD + "kv_sharing: {every: 2}\n", "field 'kv_sharing' declares cross-layer K/V sharing"),
    (GOOD + "kv_lora_rank: 512\n", "field 'kv_lora_rank'"),
    (GOOD.replace("kv_heads: 2", "kv_heads: 3"), "field 'kv_heads' (3) must divide heads (8)"),
    (GOOD.replace("layers: 2", "layers: -2"), "field 'layers'"),
    (GOOD.replace("head_dim: 64", "head_dim: 6.5"), "field 'head_dim'"),
    (GOOD.replace("heads: 8\n", ""), "missing field 'heads'"),
    (GOOD + "colour: red\n", "unknown field 'colour'"),
    (GOOD + "window_layers: even\n", "field 'window_layers' without a sliding_window"),
    (GOOD + "sliding_window: 16\nwindow_layers: [0, 5]\n", "field 'window_layers'"),
    (GOOD + "source: {fields: {num_hidden_layers: 3}}\n", "field 'layers' is 2 but the cited config's"),
    (GOOD + "attention: mha\n", "field 'attention' is mha but kv_heads is 2"),
    ("[1, 2]\n", "expected a mapping"),
    ("name: [\n", "malformed YAML"),
])
def test_bad_preset_files_are_one_line_errors(tmp_path, text, needle):
    p = write(tmp_path, text)
    with pytest.raises(InputError) as e:
        load_preset_file(p)
    msg = str(e.value)
    assert needle in msg and str(p) in msg and "\n" not in msg


def test_user_presets_are_found_on_the_model_path(tmp_path, monkeypatch):
    write(tmp_path, GOOD + "aliases: [tiny-model]\n", "my-tiny.yaml")
    monkeypatch.setenv("PERFMODEL_MODEL_PATH", str(tmp_path))
    assert resolve("my-tiny").heads == 8 and resolve("tiny-model").key == "my-tiny"
    assert resolve(str(tmp_path / "my-tiny.yaml")).kv_heads == 2
    with pytest.raises(InputError, match="unknown model 'nope'"):
        resolve("nope")


def _predict_sum(est, preset, w, dtype="bf16"):
    """Each layer group's figure recomputed with perfmodel.predict for the same shapes."""
    step = 0.0
    for (n, window), group in zip(preset.layer_groups(), est.groups):
        calls, _ = layer_shapes(w, window)
        per_layer = sum(perfmodel.predict(gpu=est.gpu, kernel=est.kernel, B=w.batch, H=preset.heads,
                                          Hkv=preset.kv_heads, d=preset.head_dim, dtype=dtype, **c).time_s
                        for c in calls)
        assert group["per_layer_s"] == pytest.approx(per_layer, rel=1e-12)
        step += n * per_layer
    assert est.per_step_s == pytest.approx(step, rel=1e-12)
    assert est.per_layer_s == pytest.approx(step / preset.layers, rel=1e-12)


@pytest.mark.parametrize("model, kw", [
    ("llama-3.1-8b", dict(prompt=8192)),
    ("llama-3.1-70b", dict(context=32768, new_tokens=1)),
    ("gemma-2-9b", dict(prompt=8192)),                     # two windowed calls on 21 layers, one on the other 21
    ("mistral-7b-v0.1", dict(context=20000, new_tokens=4)),
])
def test_per_layer_figures_are_the_sum_of_predict(model, kw):
    r = perfmodel.llm(model=model, gpu=["h100", "h200"], batch=4, **kw)
    preset, w = resolve(model), workload(batch=4, **kw)
    ok = [e for e in r.estimates if e.supported]
    bundled = {"fa2_tc", "sdpa-flash", "sdpa-cudnn"}      # (other tests may register toy kernels too)
    assert bundled <= {e.kernel for e in ok} and len([e for e in ok if e.kernel in bundled]) == 6
    for e in ok:
        _predict_sum(e, preset, w)
        assert e.tflops > 0 and e.gbps > 0 and e.bound
    assert {k: why for k, why in r.skipped if k in ("fa1", "fa2")} == {"fa1": "runs fp32 only, not bf16",
                                                                       "fa2": "runs fp32 only, not bf16"}


def test_llama_per_layer_is_one_predict_call():
    r = perfmodel.llm(model="llama-3.1-8b", gpu="h200", batch=8, prompt=8192, kernel="sdpa-flash")
    p = perfmodel.predict(gpu="h200", kernel="sdpa-flash", B=8, H=32, Hkv=8, N=8192, d=128, dtype="bf16", causal=True)
    (e,) = r.estimates
    assert e.per_layer_s == p.time_s and e.per_step_s == pytest.approx(32 * p.time_s)
    fastest = r.fastest()["h200"]
    assert fastest["kernel"] == "sdpa-flash" and fastest["next"] is None


def test_windows_shape_the_calls():
    w = workload(batch=1, prompt=10000)
    calls, note = layer_shapes(w, 4096)
    assert [(c["Nq"], c["Nk"], c["causal"]) for c in calls] == [(4096, 4096, True), (5904, 4096, False)]
    # the two calls hold the band's query-key pairs: each query sees min(i + 1, W) keys (FLOPs up to the diagonal)
    band = sum(min(i + 1, 4096) for i in range(10000))
    pairs = 4096 * 4097 // 2 + 5904 * 4096
    assert pairs == band and "two launches" in note
    calls, _ = layer_shapes(workload(batch=1, prompt=4096), 4096)
    assert len(calls) == 1 and calls[0]["Nk"] == 4096
    calls, note = layer_shapes(workload(batch=1, context=100000, new_tokens=2), 4096)
    assert calls == [dict(Nq=2, Nk=4096, causal=True, mode="fwd")] and "4096" in note
    calls, _ = layer_shapes(workload(batch=1, train=True, seq=2048), None)
    assert calls == [dict(Nq=2048, Nk=2048, causal=True, mode="fwd_bwd")]


def test_training_without_a_backward_model_is_listed_as_not_run():
    r = perfmodel.llm(model="llama-3.1-8b", gpu="h200", batch=4, train=True, seq=8192)
    for e in r.estimates:
        if not e.supported:
            assert "not written yet" in e.reason and e.per_step_s is None
    assert r.to_dict()["covers"].startswith("attention alone")


def test_outside_the_measured_ranges_is_flagged():
    # the H100 has no decode measurements: Nq = 1 lies below every H100 row
    r = perfmodel.llm(model="llama-3.1-8b", gpu=["h100", "h200"], batch=8, context=4096, new_tokens=1)
    by = {(e.gpu, e.kernel): e for e in r.estimates}
    assert by["h100-sxm", "fa2_tc"].accuracy == "outside measured Nq"
    assert "Nq" in by["h100-sxm", "sdpa-flash"].outside
    assert re.match(r"±\d+\.\d% \(", by["h200", "fa2_tc"].accuracy) and not by["h200", "fa2_tc"].outside
    r = perfmodel.llm(model="llama-3.1-8b", gpu="a100-80gb", batch=8, prompt=1024)
    assert {e.accuracy for e in r.estimates if e.supported} == {"unmeasured"}
    assert [e.reason.split(" (")[0] for e in r.estimates if not e.supported] == ["models cuDNN's Hopper kernel"]


@pytest.mark.parametrize("kw, needle", [
    (dict(prompt=8, seq=8, train=True), "give one phase"),
    (dict(), "give one phase"),
    (dict(context=8), "both --context"),
    (dict(train=True), "both --train and --seq"),
])
def test_bad_workloads(kw, needle):
    with pytest.raises(InputError, match=needle):
        perfmodel.llm(model="llama-3.1-8b", gpu="h100", batch=1, **kw)
    with pytest.raises(InputError, match="give the batch"):
        perfmodel.llm(model="llama-3.1-8b", gpu="h100", prompt=8)


def test_measured_ranges_json_is_what_the_csvs_hold():
    """perfmodel/evaluation/measured_ranges.json (shipped) equals what examples/measured_ranges.py computes from the
    committed CSVs now."""
    from util import script

    mod = script("measured_ranges")
    assert measured_ranges() == mod.ranges()
    assert (ROOT / "perfmodel/evaluation/measured_ranges.json").read_text() == mod.text(mod.ranges())


def test_presets_and_ranges_ship_in_the_wheel():
    from test_package import wheel_files

    files = set(wheel_files())
    assert {f"perfmodel/models/{k}.yaml" for k in CONFIGS} | {"perfmodel/evaluation/measured_ranges.json"} <= files
