"""Literal simulations of the two bundled kernels' loop nests, warp instruction by warp instruction.

Written independently of the closed forms in perfmodel/kernels/: every loop of csrc/fa1.cu and csrc/fa2.cu is a
Python loop here, every shared-memory instruction gets its per-lane byte addresses and its wavefronts from
perfmodel.banks.wavefronts (the generic enumerator, not the stride tables the closed forms use).

Besides the launch-wide counts, each simulation tallies, while it walks the loops:

* ``warp_other``: every warp's loop steps times the per-architecture overhead constant that prices that step
  (the constants from the kernel module's ARCH facts, as the closed forms take them; the steps counted here);
* ``path_<feature>`` (model.counts.PATH_FEATURES) for the latency path of one block: the block of head 0
  (fa2: its first Q tile, the fullest) and in it the path warp (fa1: warp 0, the first and fullest warp of
  each Q tile; fa2: warp 0, rows 0, W, 2W, ... in 2-D phases and threads 0-31 of each pass in row phases).
  A dot step is one iteration of an inner dot-product loop of that warp, a reduction step one of a row
  max/sum loop, an exp step one exp loop step; conflict = shared wavefronts beyond one per shared instruction
  that warp issues; gmem = its global round trips (a load whose value it then waits for; loads of one loop
  that the compiler batches four x steps at a time, as fa1's SASS does, are one trip per batch); outer =
  ``outer_iter`` per iteration of a loop that directly encloses an innermost loop, plus ``tile`` per tile step;
  fp32 / sfu = FP32 / MUFU instructions outside dot, reduction and exp steps; sync = __syncthreads.

Each of these is tallied twice: under its own name as the literal reading of the .cu source, and under
``spec_<name>`` as the closed form states it (its formulas and comments). The two differ only at the
departures marked ``DEPARTURE`` below (tests/kernels/test_path_enumeration.py lists them and checks both ways).
"""

from __future__ import annotations

import math
from collections import Counter

from perfmodel.hw.banks import wavefronts
from perfmodel.kernels import fa1 as fa1_model, fa2 as fa2_model

F = 4
PATH = ("dot", "reduction", "exp", "outer", "conflict", "fp32", "sfu", "gmem", "sync")


class _Tally:
    """Two readings of the same walk: the literal one (``c[name]``) and the closed form's (``c['spec_'+name]``)."""

    def __init__(self, c: Counter):
        self.c = c
        for f in PATH:
            c["path_" + f] += 0
            c["spec_path_" + f] += 0
        c["warp_other"] += 0
        c["spec_warp_other"] += 0

    def _add(self, name, n, spec, why):
        self.c[name] += n
        self.c["spec_" + name] += n if spec is None else spec
        if spec is not None:
            assert why, "a departure needs its label"
            self.c[f"departure:{why}:{name}"] += n - spec     # literal minus closed-form reading

    def path(self, on, feature, n=1, spec=None, why=None):
        """Add n steps of ``feature`` to the path if ``on`` (the path warp of the path block); the closed form
        adds ``spec`` instead where given (the DEPARTURE labelled ``why``)."""
        if on:
            self._add("path_" + feature, n, spec, why)

    def other(self, n, spec=None, why=None):
        self._add("warp_other", n, spec, why)


def _sectors(byte_addrs):
    return len({a // 32 for a in byte_addrs})


def _shared_ops(c: Counter):
    """lds/sts recorders: one warp instruction with its per-lane byte addresses (n times); they return the
    wavefronts of one such instruction."""
    def record(kind):
        def op(addrs, n=1):
            wf = wavefronts(addrs)
            c[f"warp_{kind}"] += n
            c[f"smem_{kind[:2]}_wavefronts"] += n * wf
            c[f"smem_{kind[:2]}_bytes"] += n * F * len(addrs)
            return wf
        return op
    return record("lds"), record("sts")


def fa1(B, H, N, d, Br, Bc, arch="sm_90") -> Counter:
    c = Counter()
    Tc, Tr = math.ceil(N / Bc), math.ceil(N / Br)
    warps = [list(range(w * 32, min(w * 32 + 32, Br))) for w in range(math.ceil(Br / 32))]
    o = fa1_model.ARCH[arch].overheads
    t = _Tally(c)

    lds, sts = _shared_ops(c)

    def ldg(addrs):
        c["warp_ldg"] += 1
        c["gld_sectors"] += _sectors(addrs)
        c["l2_read_bytes"] += F * len(addrs)

    def stg(addrs):
        c["warp_stg"] += 1
        c["l2_write_bytes"] += F * len(addrs)

    def fp32(lanes, kind, n=1, flops_kind=True):
        c["warp_fp32"] += n
        if flops_kind:
            c[kind] += n * len(lanes)

    def sfu(lanes, n=1):
        c["warp_sfu"] += n

    for bh in range(B * H):
        base = bh * N * d
        for j in range(Tc):
            kv0 = j * Bc
            nc = min(Bc, N - kv0)
            k = 0
            while k * Br < nc:                                   # for r = tx; r < nc; r += Br
                for w in warps:
                    lanes = [tx for tx in w if tx + k * Br < nc]
                    if not lanes:
                        continue
                    on = bh == 0 and w is warps[0]               # the path: warp 0 of the (only) block
                    t.other(o["outer_iter"])                     # an r iteration (it encloses the x loop)
                    # DEPARTURE fa1-outer-kv: the closed form's path has no outer step for these r iterations
                    t.path(on, "outer", o["outer_iter"], spec=0, why="fa1-outer-kv")
                    for x in range(d):
                        t.other(2 * o["kvload_step"])            # one K and one V element
                        t.path(on, "gmem", 1 if x % 4 == 0 else 0)   # loads batched four x steps at a time
                        for _ in ("K", "V"):
                            ldg([(base + (kv0 + tx + k * Br) * d + x) * F for tx in lanes])
                            wf = sts([((tx + k * Br) * d + x) * F for tx in lanes])
                            # DEPARTURE fa1-conflict-kv: the closed form's path leaves out the Kj/Vj store
                            # conflicts (lane stride d) of its warp's K/V rows
                            t.path(on, "conflict", wf - 1, spec=0, why="fa1-conflict-kv")
                k += 1
            t.path(bh == 0, "sync")                              # __syncthreads after the K/V loads
            for i in range(Tr):
                for w in warps:
                    lanes = [tx for tx in w if i * Br + tx < N]
                    if not lanes:
                        # DEPARTURE fa1-other-idle-warp: a warp with no valid row still runs this i step
                        # (row index, branch); the closed form charges ``tile`` only to warps with a row
                        t.other(o["tile"], spec=0, why="fa1-other-idle-warp")
                        continue
                    on = bh == 0 and w is warps[0]
                    t.other(o["tile"])
                    t.path(on, "outer", o["tile"])
                    rows = [i * Br + tx for tx in lanes]
                    for x in range(d):                           # Qi[tx*d + x] = Q[row, x]
                        t.other(o["qload_step"])
                        # DEPARTURE fa1-outer-2d: the closed form's path has nc + 2d outer iterations per
                        # (j, i) step, its own warp_other and the .cu nc + d (the y loop of Q K^T, the x loop
                        # of P V); the extra d is placed here, at the only other d-long loop (innermost)
                        t.path(on, "outer", 0, spec=o["outer_iter"], why="fa1-outer-2d")
                        t.path(on, "gmem", 1 if x % 4 == 0 else 0)
                        ldg([(base + r * d + x) * F for r in rows])
                        t.path(on, "conflict", sts([(tx * d + x) * F for tx in lanes]) - 1)
                    ldg([(bh * N + r) * F for r in rows])        # m_prev
                    ldg([(bh * N + r) * F for r in rows])        # l_prev
                    t.path(on, "gmem")                           # one trip for the two
                    for y in range(nc):
                        t.other(o["outer_iter"])
                        t.path(on, "outer", o["outer_iter"])
                        for x in range(d):
                            t.other(o["qk_step"])
                            t.path(on, "dot")
                            t.path(on, "conflict", lds([(tx * d + x) * F for tx in lanes]) - 1)
                            t.path(on, "conflict", lds([(y * d + x) * F for tx in lanes]) - 1)
                            fp32(lanes, "fma")
                        fp32(lanes, "mul")                       # sum *= scale
                        t.path(on, "conflict", sts([(tx * Bc + y) * F for tx in lanes]) - 1)
                        fp32(lanes, "cmp")                       # row_m = max
                        t.path(on, "fp32", 2)
                    for y in range(nc):
                        t.other(o["exp_step"])
                        t.path(on, "exp")
                        t.path(on, "conflict", lds([(tx * Bc + y) * F for tx in lanes]) - 1)
                        fp32(lanes, "add")                       # S - row_m
                        fp32(lanes, "exp", 3, flops_kind=False)  # __expf: three FMULs around MUFU.EX2
                        sfu(lanes)
                        c["exp"] += len(lanes)
                        t.path(on, "conflict", sts([(tx * Bc + y) * F for tx in lanes]) - 1)
                        fp32(lanes, "add")                       # row_l += p
                    fp32(lanes, "cmp")                           # m_new
                    fp32(lanes, "add", 2)                        # m_prev - m_new, row_m - m_new
                    fp32(lanes, "exp", 6, flops_kind=False)  # two __expf
                    sfu(lanes, 2)
                    c["exp"] += 2 * len(lanes)
                    fp32(lanes, "mul")                           # e_prev * l_prev
                    fp32(lanes, "fma")                           # + e_cur * row_l
                    sfu(lanes)                                   # __fdividef(1, l_new): MUFU.RCP ...
                    fp32(lanes, "mul")                           # ... and its multiply
                    fp32(lanes, "mul", 2)                        # a = l_prev * e_prev * inv_l
                    fp32(lanes, "mul")                           # b = e_cur * inv_l
                    t.path(on, "fp32", 1 + 2 + 6 + 1 + 1 + 1 + 2 + 1)
                    t.path(on, "sfu", 3)
                    for x in range(d):
                        t.other(o["outer_iter"])
                        t.path(on, "outer", o["outer_iter"])
                        for y in range(nc):
                            t.other(o["pv_step"])
                            t.path(on, "dot")
                            t.path(on, "conflict", lds([(tx * Bc + y) * F for tx in lanes]) - 1)
                            t.path(on, "conflict", lds([(y * d + x) * F for tx in lanes]) - 1)
                            fp32(lanes, "fma")
                        ldg([(base + r * d + x) * F for r in rows])
                        t.path(on, "gmem")                       # O[row, x]: read, then written back
                        fp32(lanes, "mul")                       # b * pv
                        fp32(lanes, "fma")                       # a * O + ...
                        t.path(on, "fp32", 2)
                        stg([(base + r * d + x) * F for r in rows])
                    stg(rows)                                    # m
                    stg(rows)                                    # l
            t.path(bh == 0, "sync")                              # __syncthreads at the end of the j step
    c["grid_blocks"] = B * H
    c["threads_per_block"] = Br
    c["smem_bytes_per_block"] = (Br * d + 2 * Bc * d + Br * Bc) * F
    return c


def fa2(B, H, N, d, Br, Bc, threads, pad, arch="sm_90") -> Counter:
    c = Counter()
    W = threads // 32
    dp, bcp = d + pad, Bc + pad
    Tc, Tr = math.ceil(N / Bc), math.ceil(N / Br)
    o = fa2_model.ARCH[arch].overheads
    t = _Tally(c)

    lds, sts = _shared_ops(c)

    def fp32(lanes, kind=None, n=1):
        c["warp_fp32"] += n
        if kind:
            c[kind] += n * len(lanes)

    def chunks(n):            # for (x = tx; x < n; x += 32): the lanes of each pass
        return [list(range(s, min(s + 32, n))) for s in range(0, n, 32)]

    def row_warps(R):         # for (r = tid; r < R; r += T): (warp, row indices) of each warp's pass
        out = []
        for base in range(0, R, threads):
            for w in range(W):
                rows = [r for r in range(base + 32 * w, base + 32 * w + 32) if r < R]
                if rows:
                    out.append((w, rows))
        return out

    for bh in range(B * H):
        for blk in range(Tr):
            q0 = blk * Br
            nr = min(Br, N - q0)
            blk_on = bh == 0 and blk == 0             # the path block: the first (fullest) Q tile of head 0
            for ty in range(W):                       # prologue: Q tile in (zeros past nr), O zeroed
                on = blk_on and ty == 0
                for r in range(ty, Br, W):
                    # DEPARTURE fa2-outer-prologue: an r iteration (it encloses the x loop); the closed
                    # form's path has none for the prologue (its warp_other prices rows in ``prologue``)
                    t.path(on, "outer", o["outer_iter"], spec=0, why="fa2-outer-prologue")
                    for xs in chunks(d):
                        t.other(o["prologue"])
                        # a round trip where the row is valid: (r < nr) ? Q[..] : 0 issues no load beyond nr
                        # (DEPARTURE fa2-gmem-prologue: the closed form counts every row of the warp)
                        t.path(on, "gmem", 1 if r < nr else 0, spec=1, why="fa2-gmem-prologue")
                        c["warp_ldg"] += 1
                        if r < nr:
                            c["gld_sectors"] += _sectors([((bh * N + q0 + r) * d + x) * F for x in xs])
                            c["l2_read_bytes"] += F * len(xs)
                        t.path(on, "conflict", sts([(r * dp + x) * F for x in xs]) - 1)
                        t.path(on, "conflict", sts([(r * dp + x) * F for x in xs]) - 1)
            for w, rows in row_warps(Br):
                on = blk_on and w == 0
                t.path(on, "conflict", sts([r * F for r in rows]) - 1)   # m = -inf
                t.path(on, "conflict", sts([r * F for r in rows]) - 1)   # l = 0
            t.path(blk_on, "sync")
            for j in range(Tc):
                kv0 = j * Bc
                nc = min(Bc, N - kv0)
                # DEPARTURE fa2-other-tile: every warp runs the j step's bounds, five barriers and loop
                # control; the closed form charges ``tile`` once per block and K/V tile
                t.other(W * o["tile"], spec=o["tile"], why="fa2-other-tile")
                t.path(blk_on, "outer", o["tile"])
                for ty in range(W):                   # P1
                    on = blk_on and ty == 0
                    for cc in range(ty, nc, W):
                        t.path(on, "outer", o["outer_iter"])   # warp_other prices the row in p1_chunk
                        for xs in chunks(d):
                            t.other(o["p1_chunk"])
                            t.path(on, "gmem")            # K and V loads, then their stores
                            for _ in ("K", "V"):
                                c["warp_ldg"] += 1
                                c["gld_sectors"] += _sectors([((bh * N + kv0 + cc) * d + x) * F for x in xs])
                                c["l2_read_bytes"] += F * len(xs)
                                t.path(on, "conflict", sts([(cc * dp + x) * F for x in xs]) - 1)
                t.path(blk_on, "sync")
                for ty in range(W):                   # P2
                    on = blk_on and ty == 0
                    for r in range(ty, Br, W):
                        for cs in chunks(nc):
                            t.other(o["outer_iter"] + d * o["p2_step"])
                            t.path(on, "outer", o["outer_iter"])
                            # DEPARTURE fa2-conflict-p2: the closed form gives every column chunk the
                            # lanes of the first, min(nc, 32); a partial last chunk has fewer
                            first = [(cc * dp) * F for cc in chunks(nc)[0]]
                            for x in range(d):
                                t.path(on, "dot")
                                t.path(on, "conflict", lds([(r * dp + x) * F for _ in cs]) - 1)
                                wf = lds([(cc * dp + x) * F for cc in cs])
                                t.path(on, "conflict", wf - 1, spec=wavefronts([a + x * F for a in first]) - 1,
                                       why="fa2-conflict-p2")
                                fp32(cs, "fma")
                            fp32(cs, "mul")
                            t.path(on, "fp32")            # the scale
                            t.path(on, "conflict", sts([(r * bcp + cc) * F for cc in cs]) - 1)
                t.path(blk_on, "sync")
                # DEPARTURE fa2-conflict-rows: in P3 and P5 the closed form gives each pass of warp 0 the
                # lanes of the first, min(Br, 32); a later partial pass (Br > T) has fewer
                first_rows = list(range(min(Br, 32)))
                for w, rows in row_warps(Br):            # P3
                    on = blk_on and w == 0
                    t.other(o["outer_iter"] + nc * o["row_step"])
                    t.path(on, "outer", o["outer_iter"])
                    t.path(on, "conflict", lds([r * F for r in rows]) - 1)
                    for cc in range(nc):
                        t.path(on, "reduction")
                        wf = lds([(r * bcp + cc) * F for r in rows])
                        t.path(on, "conflict", wf - 1,
                               spec=wavefronts([(r * bcp + cc) * F for r in first_rows]) - 1, why="fa2-conflict-rows")
                        fp32(rows, "cmp")
                    fp32(rows, "add")                 # mo - mx
                    fp32(rows, None, 3)               # the three FMULs of __expf
                    c["warp_sfu"] += 1
                    c["exp"] += len(rows)
                    t.path(on, "exp")                 # al[r] = __expf(mo - mx): FADD, exp, store
                    t.path(on, "conflict", sts([r * F for r in rows]) - 1)        # al
                    t.path(on, "conflict", sts([r * F for r in rows]) - 1)        # m
                t.path(blk_on, "sync")
                for ty in range(W):                   # P4
                    on = blk_on and ty == 0
                    for r in range(ty, Br, W):
                        t.other(o["outer_iter"])
                        # DEPARTURE fa2-outer-p4: the closed form's path takes an outer iteration per
                        # (row, column chunk) of P4, where the .cu (and its warp_other) has one per row
                        t.path(on, "outer", o["outer_iter"], spec=0, why="fa2-outer-p4")
                        t.path(on, "conflict", lds([r * F for _ in range(32)]) - 1)   # m[r], one word
                        for cs in chunks(nc):
                            t.other(o["p4_chunk"])
                            t.path(on, "outer", 0, spec=o["outer_iter"], why="fa2-outer-p4")
                            t.path(on, "exp")
                            t.path(on, "conflict", lds([(r * bcp + cc) * F for cc in cs]) - 1)
                            fp32(cs, "add")
                            fp32(cs, None, 3)         # the three FMULs of __expf
                            c["warp_sfu"] += 1
                            c["exp"] += len(cs)
                            t.path(on, "conflict", sts([(r * bcp + cc) * F for cc in cs]) - 1)
                t.path(blk_on, "sync")
                for w, rows in row_warps(Br):            # P5
                    on = blk_on and w == 0
                    t.other(o["outer_iter"] + nc * o["row_step"])
                    t.path(on, "outer", o["outer_iter"])
                    for cc in range(nc):
                        t.path(on, "reduction")
                        wf = lds([(r * bcp + cc) * F for r in rows])
                        t.path(on, "conflict", wf - 1,
                               spec=wavefronts([(r * bcp + cc) * F for r in first_rows]) - 1, why="fa2-conflict-rows")
                        fp32(rows, "add")
                    t.path(on, "conflict", lds([r * F for r in rows]) - 1)        # l
                    t.path(on, "conflict", lds([r * F for r in rows]) - 1)        # al
                    fp32(rows, "fma")
                    t.path(on, "fp32")                # l = l * al + sum
                    t.path(on, "conflict", sts([r * F for r in rows]) - 1)
                for ty in range(W):                   # P6
                    on = blk_on and ty == 0
                    for r in range(ty, Br, W):
                        t.path(on, "conflict", lds([r * F for _ in range(32)]) - 1)   # al[r]
                        for xs in chunks(d):
                            t.other(o["outer_iter"] + nc * o["p6_step"])
                            t.path(on, "outer", o["outer_iter"])
                            for cc in range(nc):
                                t.path(on, "dot")
                                t.path(on, "conflict", lds([(r * bcp + cc) * F for _ in xs]) - 1)
                                t.path(on, "conflict", lds([(cc * dp + x) * F for x in xs]) - 1)
                                fp32(xs, "fma")
                            t.path(on, "conflict", lds([(r * dp + x) * F for x in xs]) - 1)
                            fp32(xs, "fma")
                            t.path(on, "fp32")        # a * O + acc
                            t.path(on, "conflict", sts([(r * dp + x) * F for x in xs]) - 1)
                t.path(blk_on, "sync")
            for ty in range(W):                       # epilogue
                on = blk_on and ty == 0
                for r in range(ty, nr, W):
                    # DEPARTURE fa2-epilogue: the closed form charges warp 0's epilogue as one row of one
                    # chunk: fp32 2, sfu 1, gmem 1 and no outer iteration (added once, after this loop);
                    # the .cu runs ceil(nr/W) rows of ceil(d/32) chunks, and its global stores are not
                    # waited for
                    t.path(on, "outer", o["outer_iter"], spec=0, why="fa2-epilogue")
                    t.path(on, "conflict", lds([r * F for _ in range(32)]) - 1)   # l[r]
                    c["warp_sfu"] += 1                # __fdividef: MUFU.RCP ...
                    fp32(range(32), None)             # ... and its multiply
                    c["mul"] += 32
                    t.path(on, "sfu", 1, spec=0, why="fa2-epilogue")
                    t.path(on, "fp32", 1, spec=0, why="fa2-epilogue")
                    for xs in chunks(d):
                        t.other(o["epilogue"])
                        t.path(on, "conflict", lds([(r * dp + x) * F for x in xs]) - 1)
                        fp32(xs, "mul")
                        t.path(on, "fp32", 1, spec=0, why="fa2-epilogue")
                        c["warp_stg"] += 1
                        c["l2_write_bytes"] += F * len(xs)
            t.path(blk_on, "fp32", 0, spec=2, why="fa2-epilogue")
            t.path(blk_on, "sfu", 0, spec=1, why="fa2-epilogue")
            t.path(blk_on, "gmem", 0, spec=1, why="fa2-epilogue")
    c["grid_blocks"] = B * H * Tr
    c["threads_per_block"] = threads
    c["smem_bytes_per_block"] = (2 * Br * dp + 2 * Bc * dp + Br * bcp + 3 * Br) * F
    return c
