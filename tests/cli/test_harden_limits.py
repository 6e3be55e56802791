"""Issue 61, size limits: a sweep's --csv and --json are written as they are made, and --json stays the strict
JSON document it was."""

import csv
import io
import json
import sys

import pytest
from click.testing import CliRunner

from perfmodel import api, report
from perfmodel.cli import main
from perfmodel.evaluation import sweep

SWEEP = ["sweep", "--gpu", "h100", "--kernel", "fa1", "--B", "1,2", "--N", "128:2048:x2", "--d", "32,64"]


@pytest.fixture
def made(monkeypatch):
    """Sweep rows made a few at a time; records, for each batch the listing makes, its size and how many bytes
    of output were written before it."""
    monkeypatch.setattr(sweep, "ROWS_AT_ONCE", 7)
    batches = []
    params_at = sweep.SweepResult.params_at

    def spy(self, ix):
        sys.stdout.flush()
        batches.append((len(ix[0]), sys.stdout.buffer.tell()))
        return params_at(self, ix)
    monkeypatch.setattr(sweep.SweepResult, "params_at", spy)
    return batches


@pytest.mark.parametrize("fmt", ["--csv", "--json"])
def test_a_sweep_listing_is_written_as_it_is_made(made, fmt):
    r = CliRunner().invoke(main, SWEEP + [fmt])
    assert r.exit_code == 0, r.output
    n = 2 * 5 * 2 * 4 * 4
    assert sum(size for size, _ in made) == n and max(size for size, _ in made) <= 7
    written = [at for _, at in made]
    # rows are out before the last batch is made, and more with each batch: nothing waits for the whole listing
    assert written == sorted(written) and written[-1] > written[0] > 0
    if fmt == "--csv":
        rows = list(csv.DictReader(io.StringIO(r.stdout)))
    else:
        rows = json.loads(r.stdout)["rows"]
    assert len(rows) == n
    times = [float(x["time_s"]) for x in rows]
    assert times == sorted(times)


def test_a_streamed_listing_holds_what_the_result_holds():
    res = api.sweep("h100", "fa1", B=[1, 2], N=[128, 512, 2048], d=[32, 64], Br=[16, 64, 128], Bc=[16, 64])
    got = json.loads(CliRunner().invoke(main, SWEEP[:5] + ["--B", "1,2", "--N", "128,512,2048", "--d", "32,64",
                                                           "--Br", "16,64,128", "--Bc", "16,64", "--json"]).stdout)
    want = sorted(res.rows(), key=lambda r: r[1])
    assert [dict(p, time_s=t, bound=b) for p, t, b in want] == got["rows"]
    best = json.loads(CliRunner().invoke(main, SWEEP[:5] + ["--N", "128,512,2048", "--Br", "16,64,128", "--Bc",
                                                            "16,64", "--best", "--json"]).stdout)["rows"]
    res = api.sweep("h100", "fa1", N=[128, 512, 2048], Br=[16, 64, 128], Bc=[16, 64])
    assert [(r["N"], r["Br"], r["Bc"], r["runner_up"]["Br"], r["runner_up"]["Bc"]) for r in best] == [
        (p["N"], p["Br"], p["Bc"], q["Br"], q["Bc"]) for (p, _, _), (q, _) in zip(res.best(), res.runners_up())]


@pytest.mark.parametrize("items", [[], [{"a": 1}], [{"a": i, "t": float("nan")} for i in range(9000)]])
def test_json_written_in_pieces_is_the_document(items):
    parts = []
    report.write_json({"x": 1, "rows": None, "y": [2]}, "rows", iter(items), parts.append)
    doc = json.loads("".join(parts))
    assert doc == {"x": 1, "rows": report._finite(items), "y": [2]}
    assert len(parts) == 2 + len(items)
