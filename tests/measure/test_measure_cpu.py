"""Measurement plumbing that needs no GPU: grid expansion, appended rows, resume keys."""

import csv

import pytest

from perfmodel.errors import InputError
from perfmodel.measure import grid, runner


def test_seed_grid_expands_to_16():
    cfgs = grid.expand(grid.load("examples/grids/seed.yaml"), "fa1")
    assert len(cfgs) == 16
    assert {(c.tiles.Br, c.tiles.Bc) for c in cfgs} == {(16, 16), (32, 32), (64, 16), (16, 64)}
    assert all(c.key()["threads"] == c.tiles.Br and c.key()["pad"] == 0 for c in cfgs)   # fa1: Br threads, no pad
    cfgs2 = grid.expand(grid.load("examples/grids/seed.yaml"), "fa2")
    assert all(c.tiles.threads == 128 and c.tiles.pad == 1 for c in cfgs2)


def test_shuffle_keeps_the_first_set_in_front():
    raw = grid.load("examples/grids/h100-fa2.yaml")
    cfgs = grid.expand(raw, "fa2")
    assert [(c.shape.N, c.tiles.Br, c.tiles.Bc) for c in cfgs[:4]] == [(64, 16, 16), (64, 32, 32), (64, 64, 16),
                                                                         (64, 16, 64)]
    assert cfgs == grid.expand(raw, "fa2")                              # the order is fixed
    assert len(cfgs) == len(set(cfgs))


@pytest.mark.parametrize("text,needle", [("sets: []\n", "expected a 'sets' list"),
                                         ("sets:\n  - {B: [1], Q: [2]}\n", "unknown key 'Q'"),
                                         ("sets:\n  - {B: [1], threads: [64]}\n", "unknown key 'threads' for kernel fa1"),
                                         ("sets:\n  - {B: 1}\n", "'B' must be a non-empty list"),
                                         ("sets:\n  - {tiles: [32]}\n", "must be a pair"),
                                         ("sets: [oops\n", "malformed YAML")])
def test_bad_grids(tmp_path, text, needle):
    p = tmp_path / "g.yaml"
    p.write_text(text)
    with pytest.raises(InputError, match=needle):
        grid.expand(grid.load(p), "fa1")


def test_rows_are_appended_and_a_rerun_sees_them(tmp_path):
    out = tmp_path / "m.csv"
    key = dict(kernel="fa1", B=1, H=4, Hkv=4, Nq=64, Nk=64, d=32, Br=16, Bc=16, threads=16, pad=0, dtype="fp32",
               causal=0, mode="fwd", l2_flush=1)
    a = runner.Appender(out, runner.COLUMNS)
    a.add(dict(key, median_ms="1.0"))
    a.close()
    # a second writer (a rerun) appends without a second header
    b = runner.Appender(out, runner.COLUMNS)
    b.add(dict(key, Nq=128, Nk=128, median_ms="2.0"))
    b.close()
    rows = runner.read_rows(out)
    assert [r["Nq"] for r in rows] == ["64", "128"]
    assert open(out).read().count("kernel,") == 1
    assert runner.row_key(rows[0]) == runner.row_key({k: str(v) for k, v in key.items()})
    assert list(csv.reader(open(out)))[0] == runner.COLUMNS


def test_a_rerun_on_a_file_without_the_clock_columns_keeps_its_header(tmp_path):
    """Rows appended to a file written before the spin clocks existed keep that file's columns, so every line
    still matches its header (the new columns are left out, not shifted into others)."""
    out = tmp_path / "old.csv"
    key = dict(kernel="fa1", B=1, H=4, N=64, d=32, Br=16, Bc=16, threads=16, pad=0, dtype="fp32", causal=0,
               l2_flush=1)
    a = runner.Appender(out, runner.PRE_SPIN_COLUMNS)
    a.add(dict(key, median_ms="1.0", command="old"))
    a.close()
    b = runner.Appender(out, runner.COLUMNS)
    b.add(dict(key, N=128, median_ms="2.0", command="new", spin_clock_mhz_before="1900.0", median_cycles="1e6"))
    b.close()
    lines = list(csv.reader(open(out)))
    assert lines[0] == runner.PRE_SPIN_COLUMNS and all(len(x) == len(lines[0]) for x in lines)
    assert [r["command"] for r in runner.read_rows(out)] == ["old", "new"]


def test_a_one_length_file_takes_plain_rows_and_refuses_the_others(tmp_path):
    """A file of the one-length schema (N, no Hkv, Nq, Nk or mode) takes a plain row in its own columns, keyed as
    the same configuration, and refuses in one line a row it cannot hold; its bytes stay as they were."""
    out = tmp_path / "old.csv"
    key = dict(kernel="fa2_tc", B=1, H=8, Hkv=8, Nq=256, Nk=256, d=64, Br=64, Bc=64, threads=128, pad=0,
               dtype="fp16", causal=0, mode="fwd", l2_flush=1)
    a = runner.Appender(out, runner.N_COLUMNS)
    a.add(dict(key, median_ms="1.0"))
    a.close()
    (row,) = runner.read_rows(out)
    assert row["N"] == "256" and "Nq" not in row
    assert runner.row_key(row) == runner.row_key({k: str(v) for k, v in key.items()})
    before = out.read_bytes()
    for other in (dict(Nq=1), dict(Hkv=2), dict(mode="bwd")):
        b = runner.Appender(out, runner.COLUMNS)
        with pytest.raises(InputError, match="write these rows to a new file"):
            b.add(dict(key, median_ms="2.0", **other))
        b.close()
    assert out.read_bytes() == before


def test_clock_reads_nvml_and_falls_back_to_empty():
    class FakeNVML:
        NVML_CLOCK_SM = 1

        @staticmethod
        def nvmlDeviceGetClockInfo(h, which):
            return 1980

        @staticmethod
        def nvmlDeviceGetMaxClockInfo(h, which):
            return 1980

    c = runner.Clock.__new__(runner.Clock)
    c.nvml, c.h = FakeNVML, None
    assert c.sm_mhz() == 1980.0 and c.max_mhz() == 1980.0

    class Broken(FakeNVML):
        @staticmethod
        def nvmlDeviceGetClockInfo(h, which):
            raise RuntimeError("no device")

    c.nvml = Broken
    assert c.sm_mhz() == ""


def test_a_retimed_row_replaces_the_old_in_place(tmp_path):
    out = tmp_path / "m.csv"
    rows = runner.Appender(out, runner.COLUMNS)
    base = dict(kernel="fa2_tc", B=1, H=1, Hkv=1, Nq=128, Nk=128, d=64, Br=64, Bc=64, threads=128, pad=0, dtype="fp16", causal=0,
                l2_flush=1)
    for N, med in ((128, "0.5"), (256, "0.7"), (512, "0.9")):
        rows.add(dict(base, Nq=N, Nk=N, median_ms=med, p20_ms="0.1", p80_ms="1"))
    rows.close()
    key = runner.row_key({k: str(v) for k, v in dict(base, Nq=256, Nk=256).items()})
    runner.replace_row(out, key, dict(base, Nq=256, Nk=256, median_ms="0.2", p20_ms="0.19", p80_ms="0.21"))
    got = runner.read_rows(out)
    assert [(r["Nq"], r["median_ms"]) for r in got] == [("128", "0.5"), ("256", "0.2"), ("512", "0.9")]
    assert not (tmp_path / "m.tmp").exists()


class _FakeTorch:
    """Just enough of torch for Bencher, on a simulated GPU timeline: each timed call (``kernel``) takes the next
    value of ``times`` (ms); a spin of n cycles takes ``gap_ms`` + n / clock, at ``mhz`` before a call and
    ``mhz_after`` just after one (the clock dips in a long call); events read the timeline."""

    def __init__(self, times, mhz=2000.0, mhz_after=None, gap_ms=0.0):
        self.times = iter(times)
        self.now = 0.0
        self.after_call = False
        torch = self

        class Event:
            def __init__(self, enable_timing=True):
                self.t = None

            def record(self):
                self.t = torch.now

            def elapsed_time(self, other):
                return other.t - self.t

        def sleep(cycles):
            f = mhz_after if (torch.after_call and mhz_after) else mhz
            torch.now += gap_ms + cycles / (f * 1e3)
            torch.after_call = False

        self.cuda = type("cuda", (), {"Event": Event, "synchronize": staticmethod(lambda: None),
                                      "_sleep": staticmethod(sleep)})

    def kernel(self):
        self.now += next(self.times)
        self.after_call = True

    def empty(self, *a, **k):
        return type("buf", (), {"zero_": lambda self: None})()


def test_a_disturbed_batch_is_timed_again_and_the_narrowest_kept():
    from perfmodel.measure import bench

    noisy = [1.0] * 4 + [1.0, 3.0] * 5                  # warm-up and estimate runs, then a batch of 10 spread 3x
    clean = [1.0] * 4 + [1.0, 1.01] * 5
    fake = _FakeTorch(noisy + clean)
    t = bench.Bencher(fake, flush=False).run(fake.kernel, warmup=3, min_runs=10, max_runs=10)
    assert t.spread < 1.05 and t.median_ms == pytest.approx(1.005, abs=0.01)
    fake = _FakeTorch(noisy + clean)
    once = bench.Bencher(fake, flush=False).run(fake.kernel, warmup=3, min_runs=10, max_runs=10, attempts=1)
    assert once.spread > 2                              # one attempt: the disturbed batch is what there is
    assert bench.unstable("0.1", "0.2") and not bench.unstable("0.1", "0.11")


def test_the_head_start_spins_measure_the_clock_before_and_after_each_run():
    """The spins around each run read the SM clock: 1800 MHz before, 1650 just after (a dip within the call), with a
    fixed 4 us that every event pair adds, which the two-length calibration removes; the call's cycles are its time
    at the mean of the two clocks. Without the gap's removal the clock would read 2% low."""
    from perfmodel.measure import bench

    fake = _FakeTorch([0.5] * 14, mhz=1800.0, mhz_after=1650.0, gap_ms=0.004)
    b = bench.Bencher(fake, flush=False)
    t = b.run(fake.kernel, warmup=3, min_runs=10, max_runs=10)
    assert b.spin_gap_ms() == pytest.approx(0.004, rel=1e-6)
    assert t.clock_before_mhz == pytest.approx(1800.0, rel=1e-6)
    assert t.clock_after_mhz == pytest.approx(1650.0, rel=1e-6)
    assert t.median_cycles == pytest.approx(0.5e-3 * 1725e6, rel=1e-6)
    assert t.median_ms == pytest.approx(0.5)


def test_interleaved_calls_alternate_run_by_run_with_every_run_prepared():
    """Bencher.interleaved (the speed benchmark beside PyTorch's kernels): warm-up runs of each call, then run r of
    every call before run r + 1 of any, each with its spins around it: each call's Timing holds its own runs (the
    warm-ups' 9 ms none of them) and the clock they saw."""
    from perfmodel.measure import bench

    fake = _FakeTorch([9.0] * 6 + [1.0, 3.0] * 5, mhz=1800.0, gap_ms=0.004)
    order = []
    calls = {"a": lambda: (order.append("a"), fake.kernel()), "b": lambda: (order.append("b"), fake.kernel())}
    t = bench.Bencher(fake, flush=False).interleaved(calls, runs=5, warmup=3)
    assert order == ["a"] * 3 + ["b"] * 3 + ["a", "b"] * 5
    assert (t["a"].median_ms, t["b"].median_ms) == (pytest.approx(1.0), pytest.approx(3.0))
    assert t["a"].n_runs == t["b"].n_runs == 5 and t["b"].spread == pytest.approx(1.0)
    assert t["a"].clock_before_mhz == pytest.approx(1800.0, rel=1e-6)
