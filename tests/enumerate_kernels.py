"""Literal simulations of the two bundled kernels' loop nests, warp instruction by warp instruction.

Written independently of the closed forms in perfmodel/kernels/: every loop of csrc/fa1.cu and csrc/fa2.cu is a
Python loop here, every shared-memory instruction gets its per-lane byte addresses and its wavefronts from
perfmodel.banks.wavefronts (the generic enumerator, not the stride tables the closed forms use).
"""

from __future__ import annotations

import math
from collections import Counter

from perfmodel.hw.banks import wavefronts

F = 4


def _sectors(byte_addrs):
    return len({a // 32 for a in byte_addrs})


def _shared_ops(c: Counter):
    """lds/sts recorders: one warp instruction with its per-lane byte addresses (n times)."""
    def record(kind):
        def op(addrs, n=1):
            c[f"warp_{kind}"] += n
            c[f"smem_{kind[:2]}_wavefronts"] += n * wavefronts(addrs)
            c[f"smem_{kind[:2]}_bytes"] += n * F * len(addrs)
        return op
    return record("lds"), record("sts")


def fa1(B, H, N, d, Br, Bc) -> Counter:
    c = Counter()
    Tc, Tr = math.ceil(N / Bc), math.ceil(N / Br)
    warps = [list(range(w * 32, min(w * 32 + 32, Br))) for w in range(math.ceil(Br / 32))]

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
                    for x in range(d):
                        for _ in ("K", "V"):
                            ldg([(base + (kv0 + tx + k * Br) * d + x) * F for tx in lanes])
                            sts([((tx + k * Br) * d + x) * F for tx in lanes])
                k += 1
            for i in range(Tr):
                for w in warps:
                    lanes = [tx for tx in w if i * Br + tx < N]
                    if not lanes:
                        continue
                    rows = [i * Br + tx for tx in lanes]
                    for x in range(d):                           # Qi[tx*d + x] = Q[row, x]
                        ldg([(base + r * d + x) * F for r in rows])
                        sts([(tx * d + x) * F for tx in lanes])
                    ldg([(bh * N + r) * F for r in rows])        # m_prev
                    ldg([(bh * N + r) * F for r in rows])        # l_prev
                    for y in range(nc):
                        for x in range(d):
                            lds([(tx * d + x) * F for tx in lanes])
                            lds([(y * d + x) * F for tx in lanes])
                            fp32(lanes, "fma")
                        fp32(lanes, "mul")                       # sum *= scale
                        sts([(tx * Bc + y) * F for tx in lanes])
                        fp32(lanes, "cmp")                       # row_m = max
                    for y in range(nc):
                        lds([(tx * Bc + y) * F for tx in lanes])
                        fp32(lanes, "add")                       # S - row_m
                        fp32(lanes, "exp", 3, flops_kind=False)  # __expf: three FMULs around MUFU.EX2
                        sfu(lanes)
                        c["exp"] += len(lanes)
                        sts([(tx * Bc + y) * F for tx in lanes])
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
                    for x in range(d):
                        for y in range(nc):
                            lds([(tx * Bc + y) * F for tx in lanes])
                            lds([(y * d + x) * F for tx in lanes])
                            fp32(lanes, "fma")
                        ldg([(base + r * d + x) * F for r in rows])
                        fp32(lanes, "mul")                       # b * pv
                        fp32(lanes, "fma")                       # a * O + ...
                        stg([(base + r * d + x) * F for r in rows])
                    stg(rows)                                    # m
                    stg(rows)                                    # l
    c["grid_blocks"] = B * H
    c["threads_per_block"] = Br
    c["smem_bytes_per_block"] = (Br * d + 2 * Bc * d + Br * Bc) * F
    return c


def fa2(B, H, N, d, Br, Bc, threads, pad) -> Counter:
    c = Counter()
    W = threads // 32
    dp, bcp = d + pad, Bc + pad
    Tc, Tr = math.ceil(N / Bc), math.ceil(N / Br)

    lds, sts = _shared_ops(c)

    def fp32(lanes, kind=None, n=1):
        c["warp_fp32"] += n
        if kind:
            c[kind] += n * len(lanes)

    def chunks(n):            # for (x = tx; x < n; x += 32): the lanes of each pass
        return [list(range(s, min(s + 32, n))) for s in range(0, n, 32)]

    def row_warps(R):         # for (r = tid; r < R; r += T): the row indices of each warp's pass
        out = []
        for base in range(0, R, threads):
            for w in range(W):
                rows = [r for r in range(base + 32 * w, base + 32 * w + 32) if r < R]
                if rows:
                    out.append(rows)
        return out

    for bh in range(B * H):
        for blk in range(Tr):
            q0 = blk * Br
            nr = min(Br, N - q0)
            for ty in range(W):                       # prologue: Q tile in (zeros past nr), O zeroed
                for r in range(ty, Br, W):
                    for xs in chunks(d):
                        c["warp_ldg"] += 1
                        if r < nr:
                            c["gld_sectors"] += _sectors([((bh * N + q0 + r) * d + x) * F for x in xs])
                            c["l2_read_bytes"] += F * len(xs)
                        sts([(r * dp + x) * F for x in xs])
                        sts([(r * dp + x) * F for x in xs])
            for rows in row_warps(Br):
                sts([r * F for r in rows])            # m = -inf
                sts([r * F for r in rows])            # l = 0
            for j in range(Tc):
                kv0 = j * Bc
                nc = min(Bc, N - kv0)
                for ty in range(W):                   # P1
                    for cc in range(ty, nc, W):
                        for xs in chunks(d):
                            for _ in ("K", "V"):
                                c["warp_ldg"] += 1
                                c["gld_sectors"] += _sectors([((bh * N + kv0 + cc) * d + x) * F for x in xs])
                                c["l2_read_bytes"] += F * len(xs)
                                sts([(cc * dp + x) * F for x in xs])
                for ty in range(W):                   # P2
                    for r in range(ty, Br, W):
                        for cs in chunks(nc):
                            for x in range(d):
                                lds([(r * dp + x) * F for _ in cs])
                                lds([(cc * dp + x) * F for cc in cs])
                                fp32(cs, "fma")
                            fp32(cs, "mul")
                            sts([(r * bcp + cc) * F for cc in cs])
                for rows in row_warps(Br):            # P3
                    lds([r * F for r in rows])
                    for cc in range(nc):
                        lds([(r * bcp + cc) * F for r in rows])
                        fp32(rows, "cmp")
                    fp32(rows, "add")                 # mo - mx
                    fp32(rows, None, 3)               # the three FMULs of __expf
                    c["warp_sfu"] += 1
                    c["exp"] += len(rows)
                    sts([r * F for r in rows])        # al
                    sts([r * F for r in rows])        # m
                for ty in range(W):                   # P4
                    for r in range(ty, Br, W):
                        lds([r * F for _ in range(32)])   # m[r], one word for the warp
                        for cs in chunks(nc):
                            lds([(r * bcp + cc) * F for cc in cs])
                            fp32(cs, "add")
                            fp32(cs, None, 3)         # the three FMULs of __expf
                            c["warp_sfu"] += 1
                            c["exp"] += len(cs)
                            sts([(r * bcp + cc) * F for cc in cs])
                for rows in row_warps(Br):            # P5
                    for cc in range(nc):
                        lds([(r * bcp + cc) * F for r in rows])
                        fp32(rows, "add")
                    lds([r * F for r in rows])        # l
                    lds([r * F for r in rows])        # al
                    fp32(rows, "fma")
                    sts([r * F for r in rows])
                for ty in range(W):                   # P6
                    for r in range(ty, Br, W):
                        lds([r * F for _ in range(32)])   # al[r]
                        for xs in chunks(d):
                            for cc in range(nc):
                                lds([(r * bcp + cc) * F for _ in xs])
                                lds([(cc * dp + x) * F for x in xs])
                                fp32(xs, "fma")
                            lds([(r * dp + x) * F for x in xs])
                            fp32(xs, "fma")
                            sts([(r * dp + x) * F for x in xs])
            for ty in range(W):                       # epilogue
                for r in range(ty, nr, W):
                    lds([r * F for _ in range(32)])   # l[r]
                    c["warp_sfu"] += 1                # __fdividef: MUFU.RCP ...
                    fp32(range(32), None)             # ... and its multiply
                    c["mul"] += 32
                    for xs in chunks(d):
                        lds([(r * dp + x) * F for x in xs])
                        fp32(xs, "mul")
                        c["warp_stg"] += 1
                        c["l2_write_bytes"] += F * len(xs)
    c["grid_blocks"] = B * H * Tr
    c["threads_per_block"] = threads
    c["smem_bytes_per_block"] = (2 * Br * dp + 2 * Bc * dp + Br * bcp + 3 * Br) * F
    return c
