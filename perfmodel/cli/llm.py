"""`perfmodel llm`: a model's attention per layer and per step, for each GPU and kernel (perfmodel.llm)."""

from __future__ import annotations

import os
import re
import sys

import click
from rich.console import Console
from rich.table import Table

from perfmodel import report
from perfmodel.cli import main
from perfmodel.cli.common import figure_path, json_option
from perfmodel.errors import InputError
from perfmodel.llm import ATTENTION_ONLY, llm as estimate


def tokens(name: str, text, many: bool = False) -> list[int] | int | None:
    """'8192', '8k' (8 x 1024) or, where ``many``, a list or range ('1k:128k:x2', '1k,4k')."""
    if text is None:
        return None
    from perfmodel.evaluation.sweep import parse_values

    plain = re.sub(r"(\d+)\s*[kK]\b", lambda m: str(int(m.group(1)) * 1024), str(text).strip())
    vals = parse_values(name, plain)
    if many:
        return vals
    if len(vals) != 1 or not re.fullmatch(r"\d+", plain):
        raise InputError(f"--{name}: one number of tokens (8192 or 8k), got '{text}'")
    return vals[0]


def _console() -> Console:
    width = None if sys.stdout.isatty() else int(os.environ.get("COLUMNS") or 80)
    return Console(highlight=False, width=width, soft_wrap=False)


def _rate(x) -> str:
    return "—" if x is None else (f"{x:.0f}" if x >= 100 else f"{x:.3g}")


def workload_text(r) -> str:
    w, m = r.workload, r.model
    what = {"prefill": f"prefill of {w.prompt} tokens", "decode": f"decode of {w.new_tokens} token(s) after "
            f"{w.context} cached", "train": f"training step (fwd+bwd) over {w.seq} tokens"}[w.phase]
    return (f"{m.display}: {what}, batch {w.batch}, {r.dtype}; {m.layers} layers of H={m.heads} Hkv={m.kv_heads} "
            f"d={m.head_dim}"
            + (f", window {m.sliding_window} on {len(m.window_layers)} layers" if m.sliding_window else ""))


def render(console: Console, r) -> None:
    console.print(workload_text(r))
    t = Table(box=None, padding=(0, 1, 0, 0), show_edge=False, header_style="bold")
    for name, just in (("GPU", "left"), ("kernel", "left"), ("/layer", "right"), ("/step", "right"),
                       ("TFLOP/s", "right"), ("GB/s", "right"), ("bound", "left"), ("accuracy", "left")):
        t.add_column(name, justify=just, no_wrap=name != "accuracy", overflow="fold")
    for e in r.estimates:
        if e.supported:
            t.add_row(e.gpu, e.kernel, report.si(e.per_layer_s, "s"), report.si(e.per_step_s, "s"), _rate(e.tflops),
                      _rate(e.gbps), e.bound, e.accuracy)
        else:
            t.add_row(e.gpu, e.kernel, "—", "—", "—", "—", "—", "not run")
    console.print(t)
    for g, f in r.fastest().items():
        ahead = (f", {f['ratio']:.2f}x faster than {f['next']}" if f["next"] else " (the only kernel that ran)")
        console.print(f"{g}: fastest {f['kernel']}, {report.si(f['per_step_s'], 's')} a step{ahead}")
    reasons: dict = {}
    for e in r.estimates:
        if not e.supported:
            reasons.setdefault(e.reason, []).append(f"{e.kernel} on {e.gpu}")
    for why, who in reasons.items():
        console.print(f"not run: {', '.join(who)}: {why}")
    for k, why in r.skipped:
        console.print(f"skipped {k}: {why}")
    for n in r.notes:
        console.print(f"note: {n}")
    if any(e.supported and e.outside for e in r.estimates):
        console.print("outside measured: the shape leaves the measured ranges there, so its error is unknown")
    console.print(f"covers {ATTENTION_ONLY}")


def decode_figure(runs: list, title: str):
    """Attention per decode step (every layer) against context, one line per GPU and kernel; hollow markers where
    the shape lies outside the measured ranges."""
    import matplotlib.pyplot as plt

    from perfmodel import plot as _plot  # noqa: F401  (headless backend)

    fig, ax = plt.subplots(figsize=(7, 4.6))
    series: dict = {}
    for ctx, r in runs:
        for e in r.estimates:
            if e.supported:
                series.setdefault((e.gpu, e.kernel), []).append((ctx, e.per_step_s, bool(e.outside)))
    cmap = plt.get_cmap("tab10")
    colours = {k: cmap(i % 10) for i, k in enumerate(dict.fromkeys(k for _, k in series))}
    styles = {g: ("-", "--", ":", "-.")[i % 4] for i, g in enumerate(dict.fromkeys(g for g, _ in series))}
    for (g, k), pts in series.items():
        x, y = [p[0] for p in pts], [p[1] * 1e3 for p in pts]
        c = colours[k]
        ax.plot(x, y, styles[g], color=c, label=f"{k} on {g}")
        for px, py, out in zip(x, y, [p[2] for p in pts]):
            ax.plot(px, py, "o", color=c, mfc="none" if out else c)
    ax.set_xscale("log", base=2)
    ticks = sorted({p[0] for pts in series.values() for p in pts})
    if ticks:
        ax.set_xticks(ticks, [f"{t // 1024}k" if t % 1024 == 0 else str(t) for t in ticks])
    ax.set_yscale("log")
    ax.set_xlabel("context (tokens already cached)")
    ax.set_ylabel("attention per decode step, all layers (ms)")
    ax.set_title(title + "\nattention alone, not the model step; hollow: outside the measured ranges", fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    if series:
        ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


@main.command("llm")
@click.argument("model")
@click.option("--gpu", "gpus", multiple=True, required=True,
              help="a built-in GPU name or spec YAML; repeat for several")
@click.option("--batch", default=None, help="sequences run together")
@click.option("--prompt", default=None, help="prefill: prompt tokens (8192 or 8k)")
@click.option("--context", default=None,
              help="decode: tokens already cached; with -o a list or range (1k:128k:x2)")
@click.option("--new-tokens", "new_tokens", default=None, help="decode: tokens generated in the step")
@click.option("--train", is_flag=True, help="a training step (forward and backward) over --seq tokens")
@click.option("--seq", default=None, help="training: sequence length")
@click.option("--kernel", "kernels", multiple=True,
              help="kernel models to price (repeat; default: every one that runs the workload)")
@click.option("--dtype", default="bf16", show_default=True, help="element type: fp16 or bf16 (fp32 for fa1/fa2)")
@click.option("-o", "out_path", default=None,
              help="decode: draw attention per step against --context for each kernel and GPU (.png/.svg/.pdf)")
@json_option
def llm_cmd(model, gpus, batch, prompt, context, new_tokens, train, seq, kernels, dtype, out_path, as_json):
    """A model's attention time per layer and per step for prefill (--prompt), decode (--context --new-tokens) or
    training (--train --seq), per GPU and kernel. Attention alone: not the projections, MLP or the rest of a step.

    MODEL: a preset (llama-3.1-8b, llama-3.1-70b, mistral-7b-v0.1, gemma-2-9b, ...; docs/llm.md) or a YAML file."""
    if out_path is not None:
        figure_path(out_path)
        if context is None:
            raise InputError("-o draws decode latency against context: give --context (e.g. 1k:128k:x2) and "
                             "--new-tokens")
    contexts = tokens("context", context, many=True)
    if contexts is not None and len(contexts) > 1 and out_path is None:
        raise InputError("--context: a list or range draws a figure: give -o FILE.png too")
    if contexts is not None and len(contexts) > 1 and as_json:
        raise InputError("--json with a range of contexts: give one --context, or -o for the figure")
    args = dict(model=model, gpu=list(gpus), batch=tokens("batch", batch), prompt=tokens("prompt", prompt),
                new_tokens=tokens("new-tokens", new_tokens), train=train, seq=tokens("seq", seq),
                kernel=list(kernels) or None, dtype=dtype)
    if contexts is None or len(contexts) == 1:
        r = estimate(context=contexts[0] if contexts else None, **args)
        if out_path is not None:
            from perfmodel import plot

            plot.save(decode_figure([(contexts[0], r)], workload_text(r)), out_path)     # atomic
        if as_json:
            click.echo(report.dumps(r.to_dict()))
        else:
            render(_console(), r)
        if out_path is not None:
            click.echo(f"wrote {out_path}", err=True)
        return
    runs = [(c, estimate(context=c, **args)) for c in contexts]
    last = runs[-1][1]
    title = (f"{last.model.display}: decode of {last.workload.new_tokens} token(s), batch {last.workload.batch}, "
             f"{last.dtype}")
    from perfmodel import plot

    plot.save(decode_figure(runs, title), out_path)
    render(_console(), last)
    click.echo(f"wrote {out_path} ({len(contexts)} contexts, {contexts[0]} to {contexts[-1]}; the table: the last)",
               err=True)
