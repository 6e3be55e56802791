"""The tensor-core kernel models without a GPU: the instance table matches the CUDA source, the causal tile count
and the split-KV heuristic match literal loops, and the library presets follow FlashAttention-2's tables."""

import itertools
import math
import re
from pathlib import Path

import numpy as np
import pytest

from perfmodel import api
from perfmodel.errors import InputError
from perfmodel.kernels import fa2_tc, get, sdpa

ROOT = Path(__file__).resolve().parents[2]


def test_instances_match_the_cuda_source():
    src = (ROOT / "perfmodel/kernels/csrc/fa2_tc.cu").read_text()
    table = src[src.index("kFa2TcInstances[]"):]
    table = table[:table.index("};")]
    compiled = {tuple(map(int, m)) for m in re.findall(r"FA2TC_INST\((\d+),\s*(\d+),\s*(\d+),\s*(\d+)\)", table)}
    assert compiled == set(fa2_tc.INSTANCES)
    for d, (Br, Bc, w) in fa2_tc.DEFAULTS.items():
        assert (d, Br, Bc, w) in compiled


@pytest.mark.parametrize("N", [1, 7, 64, 100, 128, 129, 1000, 4096, 5000])
@pytest.mark.parametrize("Br,Bc", [(128, 64), (64, 128), (128, 128), (64, 32), (48, 40), (128, 176)])
def test_causal_tile_count_equals_a_literal_loop(N, Br, Bc):
    literal = sum(math.ceil(min(N, (i + 1) * Br) / Bc) for i in range(math.ceil(N / Br)))
    got, blocks = fa2_tc.kv_tiles(N, N, Br, Bc, True)
    assert int(got) == literal and int(blocks) == math.ceil(N / Br)
    assert int(fa2_tc.kv_tiles(N, N, Br, Bc, False)[0]) == math.ceil(N / Br) * math.ceil(N / Bc)


@pytest.mark.parametrize("N", [128, 333, 1000, 1024, 4096])
@pytest.mark.parametrize("Br,Bc", [(128, 64), (128, 128), (64, 64), (128, 32)])
def test_causal_first_touches_equal_a_literal_walk(N, Br, Bc):
    """A causal block walks its key tiles from its diagonal down, one a step; a tile's first readers (all blocks
    that reach it at the earliest step) miss L2, every later reader hits. The model's misses per head (path_load_miss
    over the K and V loads, times the blocks) equal that literal count wherever Br >= Bc."""
    Tr = math.ceil(N / Br)
    last = [math.ceil(min(N, (i + 1) * Br) / Bc) - 1 for i in range(Tr)]   # a block's first (diagonal) tile
    first_step = {t: min(l - t for l in last if l >= t) for t in range(last[-1] + 1)}
    literal = sum(1 for l in last for t in range(l + 1) if l - t == first_step[t])
    c = fa2_tc.head_counts_fa2(N, N, 64, Br, Bc, 4, True, 2, fa2_tc.ARCH["sm_90"].overheads)
    assert float(c.path_load_miss) / 2 * Tr == pytest.approx(literal)


def test_floor_sum_is_vectorised_and_exact():
    rng = np.random.default_rng(1)
    n, m, a, b = (rng.integers(0, 50, 200) for _ in range(4))
    m = m + 1
    got = fa2_tc.floor_sum(n, m, a, b)
    want = [sum((int(a_) * i + int(b_)) // int(m_) for i in range(int(n_))) for n_, m_, a_, b_ in zip(n, m, a, b)]
    assert got.tolist() == want


def _splits_literal(bnm, sms, nnb, max_splits=128):
    # flash_api.cpp's num_splits_heuristic, as written there (pytorch/pytorch@03b7c19)
    if bnm >= 0.8 * sms:
        return 1
    max_splits = min(max_splits, sms, nnb)
    eff, best = [], 0.0
    elig = lambda s: s == 1 or math.ceil(nnb / s) != math.ceil(nnb / (s - 1))
    for s in range(1, max_splits + 1):
        e = 0.0 if not elig(s) else (bnm * s / sms) / math.ceil(bnm * s / sms)
        best = max(best, e)
        eff.append(e)
    for s in range(1, max_splits + 1):
        if elig(s) and eff[s - 1] >= 0.85 * best:
            return s
    return 1


def test_split_heuristic_equals_the_library_loop():
    cases = [(b, n) for b in (1, 8, 32, 100, 200, 211, 264, 1000) for n in (1, 2, 4, 8, 16, 33, 64, 128)]
    got = sdpa.num_splits([b for b, _ in cases], 264, [n for _, n in cases])
    assert got.tolist() == [_splits_literal(b, 264, n) for b, n in cases]


@pytest.mark.parametrize("d,causal,sm,want", [
    (64, False, "sm_90", (128, 128, 4)), (128, False, "sm_90", (128, 64, 4)), (128, True, "sm_80", (128, 64, 4)),
    (128, False, "sm_86", (128, 32, 4)), (128, True, "sm_86", (64, 64, 4)), (96, True, "sm_86", (64, 64, 4)),
    (256, False, "sm_90", (64, 64, 4)), (256, False, "sm_80", (128, 64, 8)), (192, False, "sm_90", (128, 64, 8)),
])
def test_flash_preset_follows_flash_attention_2(d, causal, sm, want):
    optin = {"sm_90": 232448, "sm_80": 166912, "sm_86": 101376}[sm]
    per_sm = {"sm_90": 233472, "sm_80": 167936, "sm_86": 102400}[sm]
    assert sdpa.fa2_preset(d, causal, sm, optin, per_sm) == want


def test_small_grids_take_the_split_kv_kernel():
    small = api.predict("h100", "sdpa-flash", B=1, H=8, N=1024, d=64, dtype="fp16").prediction
    assert int(small.tiles.splits) > 1 and int(small.tiles.Br) == 64 and int(small.tiles.Bc) == 256
    big = api.predict("h100", "sdpa-flash", B=16, H=16, N=4096, d=128, dtype="fp16").prediction
    assert int(big.tiles.splits) == 1 and (int(big.tiles.Br), int(big.tiles.Bc)) == (128, 64)


def test_causal_does_about_half_the_tensor_work():
    full = api.predict("h100", "fa2_tc", B=4, H=16, N=8192, d=128, dtype="fp16").prediction.counts
    half = api.predict("h100", "fa2_tc", B=4, H=16, N=8192, d=128, dtype="fp16", causal=True).prediction.counts
    assert float(half.tensor_fma) / float(full.tensor_fma) == pytest.approx(0.5, abs=0.01)
    assert float(full.tensor_fma) == 2 * 4 * 16 * 8192 * 8192 * 128


def test_fp32_kernels_refuse_fp16_and_causal_and_fa2_tc_refuses_unknown_tiles():
    with pytest.raises(InputError, match="fp32 only"):
        api.predict("h100", "fa2", N=512, dtype="fp16")
    with pytest.raises(InputError, match="no causal variant"):
        api.predict("h100", "fa1", N=512, causal=True)
    with pytest.raises(InputError, match="no compiled instance"):
        api.predict("h100", "fa2_tc", N=512, d=128, dtype="fp16", Br=96, Bc=64)
    with pytest.raises(InputError, match="fp16/bf16 only"):
        api.predict("h100", "fa2_tc", N=512, d=128, dtype="fp32")


def test_rtx3090_tensor_ceiling_is_the_fp32_accumulate_rate():
    ceil = api.predict("rtx3090", "fa2_tc", N=4096, d=128, dtype="fp16").prediction.ceilings
    assert ceil.compute_flops("fp16") == pytest.approx(71e12)


@pytest.mark.parametrize("N,Br,Bc", [(1024, 128, 64), (1000, 64, 64), (4096, 128, 128), (333, 128, 32)])
def test_block_spread_is_the_heaviest_blocks_share(N, Br, Bc):
    """Causal: the heaviest block (the last Q tile, every key tile) over the mean block, from a literal loop."""
    per_block = [math.ceil(min(N, (i + 1) * Br) / Bc) for i in range(math.ceil(N / Br))]
    c = fa2_tc.head_counts_fa2(N, N, 64, Br, Bc, 4, True, 2, {"tile": 0, "kstep": 0, "mask_elem": 0})
    assert float(c.block_spread) == pytest.approx(max(per_block) / np.mean(per_block))
    flat = fa2_tc.head_counts_fa2(N, N, 64, Br, Bc, 4, False, 2, {"tile": 0, "kstep": 0, "mask_elem": 0})
    assert float(flat.block_spread) == 1


@pytest.mark.parametrize("heavy_first", [True, False])
def test_dispatch_profile_matches_a_literal_launch_order(heavy_first):
    """head_blocks and block_step describe the order blocks are dispatched in: fa2_tc takes each head's last Q
    tile first (blockIdx.x = 0), FlashAttention-2 its first (m_block = blockIdx.x). Where Br is a multiple of Bc
    the work is exactly linear along that order."""
    N, Br, Bc = 2048, 128, 64
    tiles = [(i + 1) * Br // Bc for i in range(N // Br)]             # key tiles of Q tile i, causal
    order = tiles[::-1] if heavy_first else tiles
    c = fa2_tc.head_counts_fa2(N, N, 64, Br, Bc, 4, True, 2, {"tile": 0, "kstep": 0, "mask_elem": 0},
                               heavy_first=heavy_first)
    mean = np.mean(tiles)
    assert int(c.head_blocks) == len(tiles)
    assert [float(c.block_work(k)) for k in range(len(tiles))] == pytest.approx([w / mean for w in order])


def test_a_causal_grid_of_one_round_waits_for_its_heaviest_block():
    """One Q tile per SM at most: the causal launch takes about as long as its heaviest block, which does the work
    of a non-causal block of the same tiles (not the mean causal block's, about half of it), but finds its K/V
    tiles in L2 (fetched by the blocks that start at them), while the non-causal blocks of a head all wait on DRAM
    together. Measured causal/non-causal at B=H=1, N=8192, fp16 (examples/measurements/h100/fa2_tc.csv): 1.011
    (d128 128x128/8w), 0.981 (d128 128x64/4w), 0.783 (d128 64x64/4w), 0.576 (d64 64x64/4w); the unclocked run
    before it: 1.008, 0.955, 0.789, 0.575. The fewer the pipe cycles per tile, the shorter the phases that hide the
    non-causal blocks' DRAM misses, and the more those weigh. The model: 0.954, 0.911, 0.779, 0.611, within 8%
    (0.930, 0.867, 0.806, 0.733 before the in-step misses waited out what their phases leave: 27% off at d64)."""
    measured = {(128, 128, 128, 8): 1.011, (128, 128, 64, 4): 0.981, (128, 64, 64, 4): 0.783, (64, 64, 64, 4): 0.576}
    ratios = {}
    for d, Br, Bc, w in measured:
        kw = dict(gpu="h100", kernel="fa2_tc", B=1, H=1, d=d, Br=Br, Bc=Bc, warps=w, dtype="fp16")
        causal = api.predict(N=8192, causal=True, **kw)        # at most 128 blocks: fewer than SMs
        assert causal.prediction.counts.block_spread > 1.9
        ratios[(d, Br, Bc, w)] = causal.time_s / api.predict(N=8192, causal=False, **kw).time_s
    assert all(abs(r / measured[k] - 1) < 0.08 for k, r in ratios.items()), ratios
    assert list(ratios.values()) == sorted(ratios.values(), reverse=True), ratios
    kw = dict(gpu="h100", kernel="fa2_tc", B=1, H=1, d=128, Br=128, Bc=64, warps=4, dtype="fp16")
    many = dict(kw, B=32, H=16)                                 # many waves: the mean holds, about half the time
    assert 0.45 < api.predict(N=8192, causal=True, **many).time_s / api.predict(N=8192, **many).time_s < 0.6


def test_a_causal_launch_ends_after_its_last_heavy_block():
    """Two waves of heads: the last head's heaviest block starts only when the heads before it have been served,
    so the causal launch takes more than half the non-causal time. Shortest-first order (the heaviest block of all
    dispatched last) is predicted within 5% of longest-first: 2.4% faster here, since the list-scheduling residual
    moves both orders' last start and the longest-first order's last heavy block runs a full round's work beside its
    mates first (timing); before the residual it was predicted slower. No trace of a shortest-first launch decides
    it."""
    import dataclasses

    from perfmodel.hw import calibration, gpu
    from perfmodel.model import engine, timing
    from perfmodel.shape import make_shape

    spec = gpu.resolve("h100")
    cal = calibration.resolve(spec)
    k = get("fa2_tc")
    tiles = fa2_tc.FA2TCTiles(128, 64, 4)
    causal = engine.evaluate(spec, k, make_shape(1, 8, 8192, 128, "fp16", True), tiles, cal)
    full = engine.evaluate(spec, k, make_shape(1, 8, 8192, 128, "fp16", False), tiles, cal)
    assert float(causal.time_s) / float(full.time_s) > 0.6
    c = causal.counts
    light_first = dataclasses.replace(c, block_step=-c.block_step)
    args = (causal.traffic, causal.launch.grid_blocks, causal.launch.threads, causal.blocks_per_sm, spec,
            cal, k.fit_key, k.serial, k.path_pipes, k.pipe_p)
    kw = dict(own_join=k.own_join)
    assert float(timing.predict(c, *args, **kw).time_s) == pytest.approx(float(causal.time_s), rel=1e-6)
    assert float(timing.predict(light_first, *args, **kw).time_s) == pytest.approx(
        float(timing.predict(c, *args, **kw).time_s), rel=0.05)


def test_a_warps_own_pipe_work_lies_on_its_path():
    """fa2_tc's warps wait on their own MMAs, MUFU and FP32 work (path_pipes): a lone block's time is at least that
    work of one warp, and dropping it from the path can only make the prediction faster."""
    import dataclasses

    from perfmodel.hw import calibration, gpu
    from perfmodel.model import engine
    from perfmodel.shape import make_shape

    spec = gpu.resolve("h100")
    cal = calibration.resolve(spec)
    k = get("fa2_tc")
    shape = make_shape(1, 1, 16384, 128, "fp16", False)
    tiles = fa2_tc.FA2TCTiles(128, 64, 4)
    p = engine.evaluate(spec, k, shape, tiles, cal)
    c = p.counts
    warps = float(p.launch.grid_blocks) * 4                         # 128 blocks, one per SM, one warp per scheduler
    own = (c.warp_mma * cal.mma_cycles + c.warp_sfu * 32 / cal.sfu_lanes_per_clk) * 4 / warps / spec.clock_hz
    assert float(p.time_s) > own
    bare = type(k)()
    bare.path_pipes = ()
    assert float(engine.evaluate(spec, bare, shape, tiles, cal).time_s) < float(p.time_s)
    assert dataclasses.replace(c, block_spread=3).scaled(2).block_spread == 3
    assert (c + dataclasses.replace(c, block_spread=3)).block_spread == 3


@pytest.mark.parametrize("d", [64, 128])
def test_a_warp_of_two_row_tiles_exposes_half_a_chain_a_tile(d):
    """The softmax and MMA chains on a block's path: a warp holding two row tiles (128 rows, 4 warps) runs two
    independent chains interleaved, so it exposes half a chain a KV tile; one of 16 rows (8 warps) a whole one.
    The tile loop's barriers and loads are the block's and do not halve."""
    o = {"tile": 0, "kstep": 0, "mask_elem": 0}
    two, one = (fa2_tc.head_counts_fa2(4096, 4096, d, 128, 64, w, False, 2, o) for w in (4, 8))
    tiles = 4096 / 64
    assert float(one.path_fp32) == tiles * (4 * 8 + 4) and float(one.path_mma) == tiles * (d // 16 + 4)
    for f in ("path_fp32", "path_mma", "path_shfl", "path_sfu"):
        assert float(getattr(two, f)) == pytest.approx(float(getattr(one, f)) / 2), f
    for f in ("path_sync", "path_load_miss", "path_gmem"):
        assert float(getattr(two, f)) == float(getattr(one, f)), f
    # a tile too short for its warps (no row tile a warp) is masked elsewhere; its counts stay finite
    short = fa2_tc.head_counts_fa2(4096, 4096, d, 64, 64, 8, False, 2, o)
    assert np.isfinite(float(short.path_fp32))


def _load_wait_per_tile(B, H, N, d, Br, Bc, warps, **costs):
    """(What a block of a one-round launch waits on its K/V loads a KV tile, the flat floor 2 x load_miss): its
    latency path less the same path with every load free, under the shipped fit with ``costs`` replaced."""
    import dataclasses

    from perfmodel.hw import calibration, gpu
    from perfmodel.model import engine

    spec = gpu.resolve("h100")
    cal = calibration.resolve(spec)
    fit = {**cal.path_costs("fa2_tc"), **costs}

    def latency(c):
        k, shape, t = api.configure("fa2_tc", B, H, N, d, "fp16", False, gpu=spec, Br=Br, Bc=Bc, warps=warps)
        fits = dict(cal.path_fits, fa2_tc={"costs": c})
        p = engine.evaluate(spec, k, shape, t, dataclasses.replace(cal, path_fits=fits))
        assert p.launch.grid_blocks <= spec.sm_count * p.blocks_per_sm          # one round
        return float(p.timing.times_s["latency"]) * spec.tensor_clock_hz      # the clock a tensor-core launch runs at

    free = latency({**fit, "load": 0.0, "load_miss": 0.0, "miss_latency": 0.0})
    return (latency(fit) - free) / (N / Bc), 2 * fit["load_miss"]


def test_an_in_step_miss_waits_what_its_phases_leave_of_its_latency():
    """Each KV tile's V load is issued before the S phase and the next K before the PV phase (fa2_tc.cu, steps 2
    and 7): a non-causal block's miss, in step with its head's other blocks, waits out miss_latency less the phase
    it overlaps, and at least load_miss. Nsight Compute's long-scoreboard stalls of lone launches (B1 H1 N8192,
    tc_sass/stalls_per_tile.json, nothing fitted to them) order the 4-warp tiles the same way: 910 cycles a tile at
    d = 64 64x64, 483 at d = 128 64x64, 70-125 at the 128-row tiles, whose long phases leave only the floor. The
    model waits 1,400, 800 and about the floor (the floor 430; 1,280 and 780 before a warp's own MUFU and FP32 work
    overlapped on its path, which shortens the phases a miss overlaps; 1,190 and 760 before the path costs were
    refitted with a bandwidth-bound miss's DRAM time overlapping its phase): it orders them alike, but over-prices
    the first two and the floor."""
    short, floor = _load_wait_per_tile(1, 1, 8192, 64, 64, 64, 4)
    mid, _ = _load_wait_per_tile(1, 1, 8192, 128, 64, 64, 4)
    long64, _ = _load_wait_per_tile(1, 1, 8192, 64, 128, 128, 4)
    long128, _ = _load_wait_per_tile(1, 1, 8192, 128, 128, 64, 4)
    assert short > mid > floor and short == pytest.approx(910, rel=0.6)
    # (the path with free loads still holds the DRAM step time of an in-step miss, a few cycles; and the long
    # tiles' phases leave a little of the fitted latency or none: rel=0.1)
    assert long64 == pytest.approx(floor, rel=0.1) and long128 == pytest.approx(floor, rel=0.1)
    # without a fitted latency every miss costs its flat cost; a longer latency is waited out where phases are short
    flat, floor = _load_wait_per_tile(1, 1, 8192, 64, 64, 64, 4, miss_latency=0.0)
    assert flat == pytest.approx(floor, rel=0.05)
    longer, _ = _load_wait_per_tile(1, 1, 8192, 64, 64, 64, 4, miss_latency=2000.0)
    assert longer > short
    # co-resident blocks stretch the phases: four blocks a SM (B1 H16 N2048, one round) wait less than one
    crowded, _ = _load_wait_per_tile(1, 16, 2048, 64, 64, 64, 4)
    assert crowded < short


def test_tile_loads_on_the_path_miss_l2_in_step_and_hit_it_along_the_diagonal():
    """Single-buffered K/V: each KV tile's K and V loads lie on a block's path. Without a mask a head's blocks walk
    the same tiles in step, so every load is a first touch (load_miss); causal blocks start at their own diagonal
    tiles and find every later tile in L2 (load), all but their first."""
    kw = dict(gpu="h100", kernel="fa2_tc", B=1, H=1, d=64, Br=64, Bc=64, warps=4, dtype="fp16")
    full = api.predict(N=4096, causal=False, **kw).prediction.counts
    assert float(full.path_load_miss) == pytest.approx(2 * 4096 / 64) and float(full.path_load) == 0
    causal = api.predict(N=4096, causal=True, **kw).prediction.counts
    assert float(causal.path_load_miss) == pytest.approx(2)
    tiles_mean = (4096 / 64 + 1) / 2                        # a causal 64x64 block sees (i + 1) tiles
    assert float(causal.path_load) == pytest.approx(2 * tiles_mean - 2)


def test_later_rounds_find_their_tiles_in_l2():
    """A block of a later round finds its tiles in L2 where blocks of its head began in an earlier round
    (Counts.later_miss_share = 0 for fa2_tc; timing: the share of a round's blocks whose head straddles the round
    start). A launch of one round is priced as if every round missed; a launch of many rounds is faster than that,
    by at most the miss-hit difference of the later rounds' loads."""
    tiles = fa2_tc.FA2TCTiles(128, 64, 4)
    for B, many in ((1, False), (32, True)):            # 128 blocks (one round) and 4096 (16 rounds of 2 per SM)
        spec, cal, p, t_all = _fa2_tc_costs_and_timing((B, 16, 1024, 128, "fp16", False), tiles, later_miss_share=1)
        costs = cal.path_costs("fa2_tc")
        assert costs["load_miss"] > costs["load"]
        assert float(p.counts.later_miss_share) == 0
        if not many:
            assert float(p.time_s) == pytest.approx(t_all)
        else:
            rounds = math.ceil(float(p.launch.grid_blocks) / (spec.sm_count * int(p.blocks_per_sm)))
            assert rounds > 1
            bound = ((rounds - 1) * float(p.counts.path_load_miss) * (costs["load_miss"] - costs["load"])
                     / spec.clock_hz)
            assert 0 < t_all - float(p.time_s) <= bound


def _fa2_tc_costs_and_timing(shape_args, tiles, later_miss_share=None, **costs):
    """(spec, cal, prediction, time with later_miss_share replaced) of fa2_tc on the H100, its fitted path costs
    with ``costs`` replaced."""
    import dataclasses

    from perfmodel.hw import calibration, gpu
    from perfmodel.model import engine, timing
    from perfmodel.shape import make_shape

    spec = gpu.resolve("h100")
    cal = _with_costs(calibration.resolve(spec), "fa2_tc", **costs)
    k = get("fa2_tc")
    p = engine.evaluate(spec, k, make_shape(*shape_args), tiles, cal)
    c = p.counts
    if later_miss_share is not None:
        c = dataclasses.replace(c, later_miss_share=np.full_like(c.later_miss_share, later_miss_share))
    t = timing.predict(c, p.traffic, p.launch.grid_blocks, p.launch.threads, p.blocks_per_sm, spec, cal,
                       k.fit_key, k.serial, k.path_pipes, k.pipe_p, own_join=k.own_join).time_s
    return spec, cal, p, float(t)


def test_later_rounds_of_heads_that_begin_within_them_miss_as_the_first_does():
    """Rounds of even work start together: a head whose blocks all start within a round walks its tiles in step
    and misses, as in the first round. With one block per head (N = Br) nothing is found; with heads longer than
    a round most later blocks find their tiles (the launch gains a good part of the miss-hit bound)."""
    tiles = fa2_tc.FA2TCTiles(128, 64, 4)
    # one Q tile per head, 1,024 blocks: 4 rounds of 2 per SM, no block has a head-mate
    spec, cal, p, t_all = _fa2_tc_costs_and_timing((32, 32, 128, 128, "fp16", False), tiles, later_miss_share=1)
    assert int(np.asarray(p.counts.head_blocks)) == 1
    assert float(p.time_s) == pytest.approx(t_all, rel=2e-3)
    # 512 Q tiles in one head, longer than a round of 264 blocks
    spec, cal, p, t_all = _fa2_tc_costs_and_timing((1, 1, 65536, 128, "fp16", False), tiles, later_miss_share=1)
    costs = cal.path_costs("fa2_tc")
    hb, slots = int(np.asarray(p.counts.head_blocks)), spec.sm_count * int(p.blocks_per_sm)
    assert hb > slots
    rounds = math.ceil(float(p.launch.grid_blocks) / slots)
    bound = (rounds - 1) * float(p.counts.path_load_miss) * (costs["load_miss"] - costs["load"]) / spec.clock_hz
    assert 0.25 * bound < t_all - float(p.time_s) <= bound        # the path gain, joined with the pipes


def test_in_step_misses_wait_for_dram_to_deliver_every_blocks_tile():
    """Blocks that each read their own K/V tiles (one Q tile per head) and issue those loads together: each load
    after the first tile (the first is the burst) waits for the whole round's distinct tiles at the DRAM bandwidth
    when that takes longer than a miss. One block alone does not; the paths differ by exactly that. (With the flat
    miss cost, miss_latency = 0: a lone block's in-step miss may also wait out what its phase leaves of the fitted
    latency, which the test of the phase-left wait holds.)"""
    tiles = fa2_tc.FA2TCTiles(128, 64, 4)
    spec, cal, one, _ = _fa2_tc_costs_and_timing((1, 1, 128, 128, "fp16", False), tiles, miss_latency=0.0)
    spec, cal, wide, _ = _fa2_tc_costs_and_timing((8, 33, 128, 128, "fp16", False), tiles, miss_latency=0.0)
    costs = cal.path_costs("fa2_tc")
    resident = int(wide.launch.grid_blocks)
    assert resident == spec.sm_count * int(wide.blocks_per_sm)          # one full round
    clock = spec.tensor_clock_hz                                        # a tensor-core launch's SM clock
    step = resident * 64 * 128 * 2 / cal.dram_bw_bps * clock            # every block's own K (or V) tile
    assert step > costs["load_miss"]
    in_step = float(wide.counts.path_load_miss) - 2                     # K and V of the second tile
    assert in_step == 2
    extra = in_step * (step - costs["load_miss"]) / clock
    lat = lambda p: float(p.timing.times_s["latency"])
    assert lat(wide) - lat(one) == pytest.approx(extra, rel=1e-3)


def _with_costs(cal, key, **changes):
    import dataclasses

    fits = dict(cal.path_fits)
    fits[key] = {**fits.get(key, {}), "costs": {**cal.path_costs(key), **changes}}
    return dataclasses.replace(cal, path_fits=fits)


@pytest.mark.parametrize("blocks,warps,sub,shared", [(1, 4, 0, 3 / 4), (2, 4, 1 / 2, 7 / 8), (1, 8, 1 / 2, 7 / 8),
                                                    (4, 4, 3 / 4, 15 / 16)])
def test_the_joins_pipes_hold_the_other_warps_work(blocks, warps, sub, shared):
    """A warp's own work on the path_pipes lies on its path already, so the join's throughput part holds the rest:
    of the r * W warps, the path warp is one of those on its sub-partition (tensor, MUFU, FP32) or one of all on
    the SM (shared memory). A lone 4-warp block (one warp a scheduler) leaves no other warp's tensor work;
    resources off the path (issue) and kernels without path_pipes keep all of theirs."""
    from perfmodel.hw import gpu
    from perfmodel.model import timing

    spec = gpu.resolve("h100")
    t = {"tensor": 8.0, "sfu": 4.0, "fp32": 2.0, "smem": 16.0, "issue": 5.0}
    got = timing.others_work(t, blocks * warps, fa2_tc.FA2TC.path_pipes, spec)
    assert [got[k] for k in ("tensor", "sfu", "fp32")] == pytest.approx([8 * sub, 4 * sub, 2 * sub])
    assert got["smem"] == pytest.approx(16 * shared) and got["issue"] == 5.0
    assert timing.others_work(t, blocks * warps, (), spec) == t


def test_a_forward_warps_own_mufu_and_fp32_work_overlap_on_its_path():
    """On the path a warp's own pipe times add, but in the forward its MUFU and FP32 work join by the pipe-mix
    probe's p (Kernel.own_join): FP32 work up to its MUFU work's adds little, and never less than the longer of
    the two. The backward, and every kernel without own_join, adds them."""
    from perfmodel.model import timing

    own = {"tensor": 100.0, "sfu": 80.0, "fp32": 40.0, "smem": 30.0}
    p = fa2_tc.FA2TC.own_join
    assert p == fa2_tc.FA2TC.pipe_p == 5.0 and get("sdpa-flash").own_join == p and get("sdpa-cudnn").own_join == 0
    joined = float(timing.own_on_path(own, p))
    assert joined == pytest.approx(130 + (80 ** 5 + 40 ** 5) ** 0.2, rel=1e-6)
    assert 130 + 80 < joined < 130 + 80 * 1.01
    assert timing.own_on_path(own, 0.0) == sum(own.values())
    assert timing.own_on_path({"tensor": 1.0, "fp32": 2.0}, p) == 3.0            # no MUFU work: nothing to join
    spec, cal, p_fwd, _ = _fa2_tc_costs_and_timing((4, 16, 4096, 32, "bf16", False), fa2_tc.FA2TCTiles(128, 128, 4))
    flat = type(get("fa2_tc"))()
    flat.own_join = 0.0
    from perfmodel.model import engine
    from perfmodel.shape import make_shape
    summed = engine.evaluate(spec, flat, make_shape(4, 16, 4096, 32, "bf16", False), fa2_tc.FA2TCTiles(128, 128, 4),
                             cal)
    assert float(summed.time_s) > float(p_fwd.time_s)


def test_a_warps_own_work_lies_on_its_path_at_a_fitted_rate():
    """``own_path``: the rate at which a warp's own work on the path_pipes lies on its path, in multiples of the
    SM's. The committed fit (training split) finds it between the SM's rate (1) and the warp's own sub-partition's
    with none of it overlapping the warp's other work (4): about 2. A lone block's time grows with it."""
    from perfmodel.hw import calibration, gpu
    from perfmodel.model import engine
    from perfmodel.shape import make_shape

    spec = gpu.resolve("h100")
    cal = calibration.resolve(spec)
    own = cal.path_costs("fa2_tc")["own_path"]
    assert 1 < own < spec.schedulers_per_sm
    assert calibration.resolve(spec, use_fits=False).path_costs("fa2_tc")["own_path"] == 1.0
    k = get("fa2_tc")
    shape, tiles = make_shape(1, 1, 8192, 64, "fp16", False), fa2_tc.FA2TCTiles(128, 128, 4)
    t = lambda c: float(engine.evaluate(spec, k, shape, tiles, c).time_s)
    assert t(_with_costs(cal, "fa2_tc", own_path=1.0)) < t(cal) < t(_with_costs(cal, "fa2_tc", own_path=4.0))


@pytest.mark.parametrize("tiles,d,rows", [
    (fa2_tc.FA2TCTiles(64, 64, 4), 128, 16), (fa2_tc.FA2TCTiles(128, 64, 4), 128, 32),
    (fa2_tc.FA2TCTiles(128, 128, 8), 128, 32), (fa2_tc.FA2TCTiles(128, 128, 4), 64, 32),
])
def test_the_joins_p_falls_with_the_rows_a_scheduler_holds_of_a_block(tiles, d, rows):
    """Each scheduler holds Br / min(warps, 4) query rows of a block (Counts.sched_rows); the join's p is multiplied
    by (rows / 16)^-overlap_rows, which the committed fit finds between 0.1 and 1 (the co-residence probe: a 4-warp
    block of 64 rows needs a higher p than one of 128 rows or of 8 warps, whatever the blocks beside it). So a
    64-row 4-warp block keeps the p it had, and any other block's time is that of the plain p scaled so."""
    from perfmodel.hw import calibration, gpu
    from perfmodel.model import engine
    from perfmodel.shape import make_shape

    spec = gpu.resolve("h100")
    cal = calibration.resolve(spec)
    costs = cal.path_costs("fa2_tc")
    gamma = costs["overlap_rows"]
    assert 0.1 < gamma < 1
    k = get("fa2_tc")
    shape = make_shape(4, 16, 4096, d, "fp16", False)
    assert float(np.asarray(k.counts(shape, tiles, k.facts("sm_90")[0]).sched_rows)) == rows
    t = lambda c: float(engine.evaluate(spec, k, shape, tiles, c).time_s)
    scaled = _with_costs(cal, "fa2_tc", overlap=costs["overlap"] * (rows / 16) ** -gamma, overlap_rows=0.0)
    assert t(cal) == pytest.approx(t(scaled), rel=1e-5)
    if rows == 16:
        assert t(cal) == pytest.approx(t(_with_costs(cal, "fa2_tc", overlap_rows=0.0)), rel=1e-6)


def test_split_kv_pays_for_its_combine_kernel():
    """FlashAttention-2's split-KV path queues a second kernel that reads the splits' fp32 partial outputs back:
    a queued kernel with its own blocks (the preset's companion, at least what the probe's smallest queued kernel
    adds), and the partials' L2 traffic, where the one-pass kernel pays its launch alone."""
    small = dict(gpu="h100", kernel="sdpa-flash", B=1, H=8, N=512, d=128, dtype="fp16")
    p = api.predict(**small).prediction
    c = p.counts
    assert int(np.asarray(p.tiles.splits)) > 1 and int(np.asarray(c.launches)) == 1
    assert int(np.asarray(c.queued_ops)) == 0                                 # the combine's is its own
    cal = p.calibration
    assert float(p.time_s) > cal.launch_overhead_s + cal.queued_kernel_s
    from perfmodel.model import engine

    k = get("sdpa-flash")
    (comb,) = k.companions(p.shape, p.tiles, k.facts("sm_90")[0])
    assert int(np.asarray(comb.counts.queued_ops)) == 1
    assert float(p.launches[-1].time_s) >= cal.queued_kernel_s * (1 - 1e-6)
    assert int(np.asarray(comb.launch.grid_blocks)) == 8 * 512 // 4           # kBlockM = 4 rows at d = 128
    # the combine's blocks add time: the same call without them is faster
    bare = type(k)()
    bare.companions = lambda *a: ()
    assert float(engine.evaluate(p.gpu, bare, p.shape, p.tiles, cal).time_s) < float(p.time_s)
    one = api.predict(**dict(small, B=16, H=16)).prediction         # the grid fills the GPU: no split
    assert int(np.asarray(one.tiles.splits)) == 1 and int(np.asarray(one.counts.queued_ops)) == 0
    assert k.companions(one.shape, one.tiles, k.facts("sm_90")[0]) == ()
    accum = 8 * int(np.asarray(p.tiles.splits)) * 512 * (128 + 1) * 4
    assert float(p.counts.l2_write_bytes) == pytest.approx(8 * 512 * 128 * 2 + accum)


@pytest.mark.parametrize("kernel,causal,share", [("fa2_tc", True, 0), ("fa2_tc", False, 0),
                                                 ("sdpa-flash", True, 1), ("sdpa-flash", False, 0)])
def test_only_a_shortest_first_causal_block_misses_its_diagonal_in_later_rounds(kernel, causal, share):
    """fa2_tc dispatches each head's heaviest Q tile first: the blocks before a causal block have read its diagonal
    tile. FlashAttention-2 dispatches the lightest first: none has, so that load still misses (share 1)."""
    c = api.predict(gpu="h100", kernel=kernel, B=8, H=16, N=2048, d=128, dtype="fp16", causal=causal).prediction
    assert float(c.counts.later_miss_share) == share


@pytest.mark.parametrize("gpu_key", ["h100", "h200", "a100-80gb", "rtx3090", "h100-pcie"])
def test_no_launch_ends_before_its_busiest_resource(gpu_key):
    """A prediction is never shorter than the time any one SM resource needs for the launch's work (its time alone,
    ``times_s``): on an unprobed A100 the p-norm fell up to 15% below its tensor pipe's time before the floor
    (timing.predict), when GPUs of other architectures joined fa2_tc's path at the probe's generic p."""
    from perfmodel.hw import gpu

    spec = gpu.resolve(gpu_key)
    for kernel in ("fa2_tc", "sdpa-flash", "fa2"):
        for d, causal, N, BH in itertools.product((64, 128), (False, True), (512, 8192), (1, 64, 512)):
            dtype = "fp32" if kernel == "fa2" else "fp16"
            r = api.predict(gpu=spec, kernel=kernel, B=1, H=BH, N=N, d=d, dtype=dtype,
                            causal=causal and kernel != "fa2")
            alone = r.prediction.timing.times_s
            busiest = max(float(np.asarray(alone[k])) for k in ("tensor", "wgmma", "fp32", "sfu", "issue", "smem"))
            assert float(np.asarray(r.time_s)) >= busiest * (1 - 1e-6), (kernel, d, causal, N, BH)


@pytest.mark.parametrize("d, splits, trips", [(64, 128, 2 + 32 * 2), (128, 128, 2 + 32 * 5), (64, 6, 2 + 2 + 2 * 2),
                                              (256, 7, 2 + 5 + 3 * 2), (32, 2, 2 + 2 * 2)])
def test_the_combine_walks_its_splits_as_its_sass_unrolls_them(d, splits, trips):
    """fa2_tc's combine loop, unrolled by four: two dependent global round trips four splits at d <= 64 (the four
    weights' loads, then the four partial rows'), five at d >= 128 (the rows' loads one after another), two for
    each split left over (research/data/h200/decode/combine_sass_bf16.txt.gz)."""
    from perfmodel.shape import AttentionShape

    shape = AttentionShape(B=1, H=32, Hkv=1, Nq=1, Nk=32768, d=d, dtype="bf16")
    comp = fa2_tc.combine(shape, np.asarray(splits), "fa2_tc")
    assert float(comp.counts.path_gmem) == trips
