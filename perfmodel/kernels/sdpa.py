"""PyTorch's fused attention kernels as presets that describe their loop nest: nothing is fitted to their timings.

* ``sdpa-flash``: ``scaled_dot_product_attention``'s flash backend, PyTorch's vendored FlashAttention-2
  (aten/src/ATen/native/transformers/cuda/flash_attn/, read at pytorch/pytorch@04ff5be). Its tiles come from
  ``run_mha_fwd_hdim{32..256}`` in flash_fwd_launch_template.h: by head dimension, causal, and whether the GPU is
  sm8x with x > 0 (RTX 3090/4090: smaller tiles); and from ``set_params_splitkv`` in flash_api.cpp: when
  B*H*ceil(N/64) < 0.8 * 2 * SMs, the split-KV kernel (64 x {256, 128, 64} tiles, 4 warps) runs with
  ``num_splits_heuristic``'s split count. The loop nest is FlashAttention-2's: the same structure as fa2_tc, with
  Q re-read from shared memory at every k-step (``Is_Q_in_regs = false``).
* ``sdpa-cudnn``: the cuDNN backend, closed source and generated at run time. What its launch and its SASS show
  (cuDNN 9.19 on the H100: research/data/h100/sdpa_kernels.json, the profiler's record of every launch,
  and sdpa_sass/, Nsight Compute's per-instruction counts, research/scripts/ncu_sdpa_sass.sh) is taken as the preset: one
  kernel, ``..._sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x{d}...``, 384 threads (a producer warpgroup that
  copies K/V tiles by TMA, UTMALDG, and two consumer warpgroups of 64 query rows each), 128 x 128 tiles at d = 64
  and 128, causal or not, 168 registers, 134144 / 232448 bytes of shared memory (one block per SM), a persistent
  grid of min(tiles, SMs) blocks. Each consumer warpgroup's KV step is one chain: Q K^T as 8 HGMMA.64x128x16 from
  shared memory, a wait (WARPGROUP.DEPBAR), the row max (FMNMX, SHFL), the exponentials (MUFU.EX2), P V as 8 HGMMA
  with P from registers, a wait. Named barriers 4 and 5 let one warpgroup at a time run its exponentials. On the
  H200 (cuDNN 9.19, research/data/h200/sdpa_workload_calls.json) the same kernel runs every head dim from 32 to
  256 at the next of 64, 128 and 256; one query runs a decode kernel of its own, and a bottom-right causal mask
  (Nq != Nk) a materialised bias (SDPACudnn below).

``--Br/--Bc/--warps`` override a preset's tiles where FlashAttention's loop nest can hold them; the split count
is always the library's, and a split-KV launch runs its kernel's own tiles (a prediction's note says so).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from perfmodel.kernels import backward
from perfmodel.kernels.base import ArchFacts, Companion, Kernel, Launch, register
from perfmodel.kernels.common import arr, cdiv
from perfmodel.kernels.fa2_tc import FA2TC, FA2TCTiles, fold_groups, head_counts_fa2, kv_tiles, num_splits
from perfmodel.model.counts import Counts

# HEADDIM_SWITCH rounds d up to one of the head dims the build compiles. Upstream FlashAttention-2 has 160 and 224 as
# well; PyTorch's (torch 2.11) runs d 160 on its 192 kernel and d 200 on its 256 one (their launches,
# research/data/h200/headdims3_calls.json: Flash_fwd_kernel_traits<192, 128, 64, 8> and <256, 64, 64, 4>)
HEAD_DIMS = (32, 64, 96, 128, 192, 256)


def exposed_steps(c, d, Bc):
    """A block's exposed KV steps in FA2-structured counts at head dim ``d`` and ``Bc`` keys a tile (head_counts_fa2:
    path_mma = exposed steps x (KQ + KP))."""
    return c.path_mma / (arr(d) // 16 + arr(Bc) // 16)


def rounded_head_dim(d):
    """The head dimension FlashAttention-2 compiles for ``d`` (HEADDIM_SWITCH), vectorised."""
    return np.select([arr(d) <= h for h in HEAD_DIMS], HEAD_DIMS, 256)


def fa2_preset(d: int, causal: bool, sm: str, smem_optin: int, smem_per_sm: int) -> tuple[int, int, int]:
    """(Br, Bc, warps) of FlashAttention-2's forward kernel (no dropout), as run_mha_fwd_hdim* choose them."""
    hd = int(rounded_head_dim(d))
    sm8x = sm.startswith("sm_8") and sm != "sm_80"
    if hd in (32, 64):
        return 128, 128, 4
    if hd == 96:
        return (64, 64, 4) if sm8x and causal else (128, 64, 4)
    if hd == 128:
        if sm8x:
            return (64, 64, 4) if causal else (128, 32, 4)
        return 128, 64, 4
    if hd == 192:
        return 128, 64, 8
    big = smem_optin >= 2 * hd * (128 + 2 * 64) and smem_per_sm < 4 * hd * (64 + 2 * 64)
    return (128, 64, 8) if big else (64, 64, 4)


@dataclass(frozen=True)
class SDPATiles(FA2TCTiles):
    """The library's tiles (its preset unless given) and the split-KV count it chooses (resolved per GPU)."""

    splits: object = 1

    @classmethod
    def fields(cls):
        return ("Br", "Bc", "warps")


class _SDPA(Kernel):
    external = True
    dtypes = ("fp16", "bf16")
    causal = True
    gqa, cross = True, True
    modes = ("fwd", "bwd")
    Tiles = SDPATiles
    arch = {"sm_90": ArchFacts(regs=255, source="estimate: FA2's kernels run at 255 registers",
                               overheads={"tile": 60, "kstep": 2, "mask_elem": 1})}
    backend = ""

    def preset(self, gpu, d, causal):
        raise NotImplementedError

    def default_tiles(self, shape=None, gpu=None):
        """The library's own tiles for this problem on this GPU (an sm_90 GPU when none is given)."""
        d = int(np.asarray(shape.d)) if shape is not None else 128
        causal = bool(shape.causal) if shape is not None else False
        Br, Bc, w = self.mode_preset(gpu, d, causal, shape.mode if shape is not None else "fwd")
        return SDPATiles(Br, Bc, w)

    def mode_preset(self, gpu, d, causal, mode):
        """The forward's preset, or the backward's tiles (perfmodel.kernels.backward) for mode bwd and fwd_bwd."""
        return self.preset(gpu, d, causal) if mode == "fwd" else backward.library_tiles(self, d, causal)

    def forward_tiles(self, shape, tiles, gpu=None):
        """The forward of a forward-plus-backward call runs the library's own forward tiles (every problem's)."""
        return self.library_tiles(shape.with_mode("fwd"), gpu)

    def library_tiles(self, shape, gpu):
        """The preset's tiles for every problem of a vectorised shape (a measured row's tile columns record the
        preset of the day it was measured; the library chose its own)."""
        d, causal = np.broadcast_arrays(arr(shape.d), np.asarray(shape.causal, bool))
        out = np.zeros((3,) + d.shape, np.int64)
        for dd, cz in set(zip(d.ravel().tolist(), causal.ravel().tolist())):
            sel = (d == dd) & (causal == cz)
            out[:, sel] = np.array(self.mode_preset(gpu, int(dd), bool(cz), shape.mode))[:, None]
        return SDPATiles(Br=out[0], Bc=out[1], warps=out[2])

    def sweep_values(self, name):
        return None

    def constraints(self, gpu, shape, tiles):
        """The tensor-core limits, and tiles the loop nest can hold (given with --Br/--Bc/--warps): FlashAttention's
        kernels run 4 or 8 (consumer) warps, each owning 16 query rows per row tile (``Tile<16 * kNWarps, ...>``),
        and a KV tile of whole 16-key MMA k-steps."""
        Br, Bc, W = (arr(x) for x in (tiles.Br, tiles.Bc, tiles.warps))
        if shape.mode != "fwd":              # the backward's warps split both the rows and the keys of a tile
            return self.tensor_core_limits(gpu, shape) + [
                ((W == 4) | (W == 8), "tile {tiles}: FlashAttention's kernels run 4 or 8 warps a block"),
                ((Br % 16 == 0) & (Bc % 16 == 0), "tile {tiles}: Br and Bc must be multiples of 16")]
        return self.tensor_core_limits(gpu, shape) + [
            ((W == 4) | (W == 8), "tile {tiles}: FlashAttention's kernels run 4 or 8 warps a block"),
            (Br % (16 * np.maximum(W, 1)) == 0, "tile {tiles}: Br must be a multiple of 16 x warps (16 query rows a "
                                                "warp)"),
            (Bc % 16 == 0, "tile {tiles}: Bc must be a multiple of 16 (the P V MMA's k-step)")]

    def run_shape(self, shape):
        """The problem the library's kernel runs for ``shape`` (the same, unless a preset says otherwise)."""
        return shape

    def grid_blocks(self, shape, tiles):
        if shape.mode != "fwd":
            return backward.grid_blocks(self, shape, tiles)
        shape = self.run_shape(shape)
        return arr(shape.B) * arr(shape.H) * cdiv(shape.Nq, tiles.Br) * arr(tiles.splits)

    # What a kernel compiled for a larger head dim than the problem's reads and writes in global memory is the
    # tensors'; its MMAs and their operands run at the head dim it was compiled for (kernel_head_dim)
    MEMORY = ("gld_sectors", "l2_read_bytes", "l2_write_bytes", "l2_red_bytes", "dram_read_once", "dram_read_reuse",
              "dram_write_once", "dram_write_reuse", "reuse_live_bytes", "burst_own_bytes", "burst_kv_bytes",
              "stage_bytes")

    def kernel_head_dim(self, d, tiles=None, mode="bwd"):
        """The head dim the library's kernel for ``d`` is compiled for (``tiles`` and ``mode``: which of its kernels
        runs, where that matters; without them, its decode and backward kernels')."""
        return arr(d)

    def counts(self, shape, tiles, facts):
        c = self._own_counts(shape, tiles, facts)
        dk = self.kernel_head_dim(shape.d, tiles, shape.mode)
        if np.all(dk == arr(shape.d)):
            return c
        padded = self._own_counts(dataclasses.replace(shape, d=dk), tiles, facts)
        own = dataclasses.replace(padded, **{f: getattr(c, f) for f in self.MEMORY})
        full = self.full_width_waits(tiles, dk)
        return own.where(~full, dataclasses.replace(own, burst_kv_bytes=padded.burst_kv_bytes))

    def full_width_waits(self, tiles, dk):
        """Where a kernel's step waits on its tile copies as at its own width (its copies issued for every column
        chunk, those past d zero-filled, each waited in full): none unless a preset says so."""
        return np.zeros(np.shape(dk), bool)

    def _own_counts(self, shape, tiles, facts):
        """The counts of the kernel run at ``shape``'s own head dim."""
        if shape.mode != "fwd":
            return backward.counts(self, shape, tiles, facts)
        return super().counts(self.run_shape(shape), tiles, facts)

    def smem_bytes(self, shape, tiles):
        if shape.mode != "fwd":
            return backward.smem_bytes(shape, tiles)
        return (arr(tiles.Br) + 2 * arr(tiles.Bc)) * arr(shape.d) * 2

    def companions(self, shape, tiles, facts):
        return backward.companions(self, shape, tiles, facts) if shape.mode != "fwd" else ()

    elem_fp32 = 3          # FP32-pipe instructions per attention score, softmax's (fa2_tc's: FMNMX, FFMA, FADD)

    def head_counts(self, shape, tiles, facts):
        # its blocks share their SMs evenly: the age-ordered split was traced in fa2_tc's blocks (clock reads in its
        # code), which a library's kernel does not allow; given fa2_tc's, its d = 64 rows' mean error goes from
        # +1.1% to +3.7% (research/notes/known-gaps-log.md)
        return head_counts_fa2(shape.Nq, shape.Nk, shape.d, tiles.Br, tiles.Bc, tiles.warps, shape.causal,
                               shape.element_bytes,
                               facts.overheads, q_in_registers=False, splits=tiles.splits,
                               heavy_first=self.heavy_first, elem_fp32=self.elem_fp32, age_split=False,
                               group=shape.group)

    def runner(self, torch, ext, shape, tiles):
        """PyTorch's scaled_dot_product_attention restricted to this backend: grouped heads with enable_gqa, causal
        with Nq != Nk as the bottom-right bias (torch.nn.attention.bias.causal_lower_right); the backward is
        torch.autograd.grad of its output (the forward run once, outside the timing, for mode bwd)."""
        from torch.nn.attention import SDPBackend, sdpa_kernel

        from perfmodel.measure.runner import GradRunner, Runner as Base

        backend = getattr(SDPBackend, self.backend)
        F = torch.nn.functional
        gqa = bool(np.any(np.asarray(shape.Hkv) != np.asarray(shape.H)))
        if shape.causal and int(shape.Nq) != int(shape.Nk):
            from torch.nn.attention.bias import causal_lower_right

            mask = dict(attn_mask=causal_lower_right(int(shape.Nq), int(shape.Nk)))
        else:
            mask = dict(is_causal=bool(shape.causal))

        def attend(Q, K, V):
            with sdpa_kernel([backend]):
                return F.scaled_dot_product_attention(Q, K, V, enable_gqa=gqa, **mask)

        if shape.mode == "fwd":
            class Runner(Base):
                def launch(self, Q, K, V):
                    self.O.copy_(attend(Q, K, V))        # the check reads O; timing uses timed_launch

                def timed_launch(self, Q, K, V):
                    attend(Q, K, V)

                def attributes(self):
                    return {"regs_per_thread": "", "local_bytes": "", "cuda_blocks_per_sm": ""}

            return Runner(torch, shape)

        class Grads(GradRunner):
            def forward(self, Q, K, V):
                self.leaves = tuple(x.detach().requires_grad_(True) for x in (Q, K, V))
                self.out = attend(*self.leaves)

            def backward(self, Q, K, V):
                self.grads = torch.autograd.grad(self.out, self.leaves, self.dO, retain_graph=True)

            def launch(self, Q, K, V):
                self.backward(Q, K, V)
                for buf, g in zip((self.dQ, self.dK, self.dV), self.grads):
                    buf.copy_(g)

            def forward_backward(self, Q, K, V):
                out = attend(*self.leaves)
                torch.autograd.grad(out, self.leaves, self.dO)

            def attributes(self):
                return {"regs_per_thread": "", "local_bytes": "", "cuda_blocks_per_sm": ""}

        return Grads(torch, shape)


class SDPAFlash(_SDPA):
    """FlashAttention-2: the same resource groups as fa2_tc (a warp's MMAs wait on its ldmatrix fragments, its
    softmax's MUFU and FP32 work feed each other); its path costs are fa2_tc's (the same loop forms), fitted on
    fa2_tc's training split: none of sdpa-flash's own timings."""

    name = "sdpa-flash"
    path_pipes = FA2TC.path_pipes         # FlashAttention-2's loop step: the same dependent chain as fa2_tc's
    serial, pipe_p, own_join = FA2TC.serial, FA2TC.pipe_p, FA2TC.own_join      # and the same pipe mix
    path_costs_from = "fa2_tc"
    description = "PyTorch SDPA's flash backend (vendored FlashAttention-2): its tile table and split-KV heuristic"
    backend = "FLASH_ATTENTION"
    # causal launch order: flash_fwd_kernel.h takes m_block = blockIdx.x, so each head's longest Q tile runs last
    heavy_first = False
    # per score, read off Nsight Compute's executed-instruction counts of flash_fwd_kernel (d = 64, fp16;
    # research/data/h100/sdpa_sass, research/scripts/ncu_sdpa_sass.sh): FMNMX, FSETP and two FMULs around MUFU.EX2
    # (exp2f's range check and scaling), the scale FMUL, two FADDs: 7 (136 FMNMX, 136 FSETP, 464 FMUL with 64 of
    # them O's rescale, 256 FADD per warp per 128 x 128 tile of 128 scores a thread)
    elem_fp32 = 7

    # flash_fwd_splitkv_combine_kernel, queued behind a split-KV launch (flash_fwd_launch_template.h,
    # run_flash_splitkv_fwd): one block of the split kernel's 128 threads per kBlockM query rows, kBlockM = 4 when
    # the rounded head dim is a multiple of 128, 8 of 64, else 16. Each block reads its rows' log-sum-exps from
    # every split (a global round trip), reduces them through shared memory (two barriers), then reads and scales
    # each split's partial O (a round trip per split: the loop over splits is not unrolled) and writes O.
    # The launch record gives 54 registers (research/data/h100/sdpa_calls.json). Its instructions per warp,
    # by what a dependent one waits for (COMBINE_CLASSES: at 2 splits, and what each further split adds), are
    # Nsight Compute's executed counts per SASS instruction sorted by opcode (research/scripts/flash_layout.py on
    # research/data/h100/combine_warm/: B1 H16 N512 d128 and B1 H8 N512 d64 at 2 splits, 608 a warp;
    # B1 H8 N512 d128 at 4 splits, 619): fixed-latency integer and FP32 work (the index arithmetic: 14 integer
    # divisions a warp), MUFU and conversions (each division's I2F, MUFU.RCP, F2I; the exponentials and logs),
    # shared loads, stores and shuffles, constant loads (LDC: the kernel's parameters), global loads, barriers.
    # The warp's instructions mostly wait on one another (ncu: 8.8-11.1 warp cycles per instruction with the
    # caches as the split kernel left them): each lies on its path at its class's latency, a constant load at a
    # shared load's (an estimate: no probe measures the constant cache).
    COMBINE_THREADS = 128
    COMBINE_REGS = 54
    COMBINE_CLASSES = {"alu": (544.5, 2.375), "sfu": (43.5, 0.0), "smem": (5.5, 2.375), "const": (10.0, 0.0),
                       "gload": (2.25, 1.0), "sync": (2.0, 0.0)}

    def run_shape(self, shape):
        """flash_api.cpp's mha_fwd folds a decode step's grouped query heads into query rows, and its blocks of rows
        that see no key exit at once (fa2_tc.fold_groups)."""
        return fold_groups(shape, drop_empty=True)

    def kernel_head_dim(self, d, tiles=None, mode="bwd"):
        """FlashAttention-2's instance for ``d`` (d = 80 runs the 96 kernel, its loops over all 96 columns, the
        last 16 zero-filled)."""
        return rounded_head_dim(d)

    # A head dim below the instance's (d = 80 runs the 96 kernel) runs it with Is_even_K false: its copies predicate
    # the columns past d and zero-fill them in shared memory. Nsight Compute's counts of the causal forward (B 2 H 16
    # N 2048) at d 48, 80, 112 and 200 against 64, 96, 128 and 256 (research/data/h200/flash_sass/flash_d80_sass.tar.gz
    # and flash_ragged_counters.tar.gz) put 235, 112, 147 and 219 more warp instructions a warp a KV tile (LEA, IMAD,
    # ISETP, STS) on the same tensor and copy counts, and 26%, 11%, 20% and 15% more time; the split-KV decode at d 80
    # (B 8 H 32 Hkv 8 Nk 32768) 139 (9% more time). A warp's chain waits on them, each priced as a dependent
    # instruction (4 cycles, gpus/arch fp32_latency_cycles; the fitted FP32 path cost, near 0, is fa2_tc's loop's):
    # the profiles' time differences are 3.7-12 cycles an added instruction. RAGGED_K: by instance head dim, the
    # forward kernel's; an instance not read takes the nearest one read.
    RAGGED_K = {64: 235, 96: 112, 128: 147, 256: 219}
    RAGGED_K_SPLIT = {96: 139}
    DEPENDENT_CYCLES = 4

    def counts(self, shape, tiles, facts):
        c = super().counts(shape, tiles, facts)
        d = arr(shape.d)
        hd = self.kernel_head_dim(d)
        ragged = (hd != d) & (shape.mode == "fwd")
        if not np.any(ragged):
            return c
        run = self.run_shape(shape)
        Br, Bc, W, s = (arr(x) for x in (tiles.Br, tiles.Bc, tiles.warps, tiles.splits))
        tiles_h = kv_tiles(run.Nq, run.Nk, Br, Bc, bool(run.causal), s)[0]
        per = self.ragged_instructions(hd, s > 1)
        steps = exposed_steps(c, hd, Bc)
        extra = dataclasses.replace(c, warp_other=c.warp_other + np.asarray(run.heads, float) * tiles_h * W * per,
                                    path_cycle=c.path_cycle + steps * per * self.DEPENDENT_CYCLES)
        return extra.where(ragged, c)

    def ragged_instructions(self, hd, split):
        """RAGGED_K's warp instructions a warp a KV tile for instance head dims ``hd`` (the split-KV kernel's where
        read)."""
        read = np.array(sorted(self.RAGGED_K))
        near = read[np.argmin(np.abs(np.asarray(hd)[..., None] - read), axis=-1)]
        fwd = np.select([near == h for h in read], [self.RAGGED_K[h] for h in read])
        spl = np.select([hd == h for h in self.RAGGED_K_SPLIT], list(self.RAGGED_K_SPLIT.values()), fwd)
        return np.where(split, spl, fwd)

    def _own_counts(self, shape, tiles, facts):
        """The run shape's counts, and what the blocks of rows that see no key still do before they exit
        (flash_fwd_kernel.h: "we exit early and write 0 to gO and gLSE"): their rows of O as zeros and their
        log-sum-exps, 16-byte stores that go to DRAM once."""
        c = super()._own_counts(shape, tiles, facts)
        if shape.mode != "fwd" or not shape.causal:
            return c
        rows = np.asarray(shape.heads, float) * np.maximum(arr(shape.Nq) - arr(shape.Nk), 0)
        if not np.any(rows > 0):
            return c
        zeros = rows * (arr(shape.d) * shape.element_bytes + 4)
        return dataclasses.replace(c, l2_write_bytes=c.l2_write_bytes + zeros, dram_write_once=c.dram_write_once + zeros,
                                   warp_stg=c.warp_stg + zeros / 512)

    def grid_dims(self, shape, tiles):
        """flash_fwd_launch_template.h: (Q tiles, B, H); with split-KV (Q tiles, splits, B * H); the backward's
        (K tiles, B, H)."""
        if shape.mode != "fwd":
            return cdiv(shape.Nk, tiles.Bc), arr(shape.B), arr(shape.H)
        shape = self.run_shape(shape)
        s, B, H = arr(tiles.splits), arr(shape.B), arr(shape.H)
        return cdiv(shape.Nq, tiles.Br), np.where(s > 1, s, B), np.where(s > 1, B * H, H)

    def buffer_bytes(self, shape, tiles):
        """flash_api.cpp's fp32 buffers: the log-sum-exp of every query row, and with split-KV each split's partial
        O (at the rounded head dim) and log-sum-exp."""
        shape = self.run_shape(shape)
        rows = np.asarray(shape.heads, float) * arr(shape.Nq)
        s = arr(tiles.splits)
        return 4 * rows * (1 + np.where(s > 1, s * (rounded_head_dim(arr(shape.d)) + 1), 0))

    def combine_classes(self, splits):
        """Instructions per warp of each class at ``splits`` splits (COMBINE_CLASSES)."""
        return {k: at2 + per * (arr(splits) - 2) for k, (at2, per) in self.COMBINE_CLASSES.items()}

    def companions(self, shape, tiles, facts):
        if shape.mode != "fwd":
            return backward.companions(self, shape, tiles, facts)
        shape = self.run_shape(shape)
        splits = arr(tiles.splits)
        if not np.any(splits > 1):
            return ()
        hd = rounded_head_dim(shape.d)
        rows = np.where(hd % 128 == 0, 4, np.where(hd % 64 == 0, 8, 16))
        on = splits > 1
        grid = np.where(on, cdiv(arr(shape.B) * arr(shape.H) * arr(shape.Nq), rows), 0)
        warps = grid * (self.COMBINE_THREADS // 32)
        k = {name: np.where(on, n, 0) for name, n in self.combine_classes(splits).items()}
        inst = sum(k.values())
        # the path: each instruction at its class's latency; the round trips are the log-sum-exps' and one per split
        c = Counts(launches=0 * grid, queued_ops=np.where(on, 1, 0), warp_other=warps * inst, path_fp32=k["alu"],
                   path_sfu=k["sfu"], path_shfl=k["smem"] + k["const"], path_gmem=np.where(on, 1 + splits, 0),
                   path_sync=k["sync"])
        launch = Launch(grid_blocks=grid, threads=np.full(np.shape(grid), self.COMBINE_THREADS),
                        smem_bytes=np.zeros(np.shape(grid)), regs=np.full(np.shape(grid), self.COMBINE_REGS))
        return (Companion(counts=c, launch=launch, key=f"{self.name}:combine"),)

    # The code of flash_fwd_kernel's causal instantiations (sm_90; fp16 and bf16 measure the same), in
    # KiB, keyed by (rounded head dim, Is_even_MN: N a multiple of both tiles): (code every warp passes through
    # once: prologue, the masking steps every block runs, epilogue; code only some warps pass through once: the
    # last masking step, which a block with fewer key tiles than masking steps skips; the main loop's body). Read
    # off Nsight Compute's executed-instruction counts per SASS instruction (examples/measurements/h100/
    # flash_sass/ and flash_sass_bf16/, `research/scripts/flash_layout.py`): 16 bytes an instruction, by how many warps executed it (all of them
    # once, some once, more than one pass). The ragged instantiation unrolls one more masking step, with both masks,
    # and so has twice the once-run code of the even one.
    CODE_KIB = {(64, True): (39.45, 0.75, 25.95), (64, False): (46.58, 37.14, 25.88),
                (128, True): (60.00, 0.72, 19.03), (128, False): (67.81, 32.70, 18.56)}

    # The split-KV kernel's prologue and epilogue (the split's key range, its fp32 partial O and log-sum-exp
    # written back), per warp per block: what Nsight Compute's executed instructions a warp hold beyond the loop's
    # counts (research/data/h100/split_sass, combine_warm, combine_sass: B1 H8 N512 d64 and d128 at one key
    # tile a block, 466 and 473; B1 H16 N512 d128 at two, 466; the per-tile counts agree with the model's within
    # 1%). Fixed-latency integer work that the block waits on: on its path as dependent instructions. The ragged
    # instantiations (N = 1000) execute 280-640 more (their masking), which the model does not count.
    SPLIT_BLOCK_INSTRUCTIONS = 468

    def head_counts(self, shape, tiles, facts):
        """FA2's counts; the split-KV kernel's prologue and epilogue (SPLIT_BLOCK_INSTRUCTIONS); and for a causal
        launch whose code was read (CODE_KIB) the instructions its warps issue from once-run code: each block
        passes through its prologue, its masking steps (ceil(Br/Bc), one more when N is not a multiple of the
        tiles; a block with fewer key tiles runs as many as it has) and its epilogue once. The split-KV kernel's
        layout was not read: no fetch term."""
        c = super().head_counts(shape, tiles, facts)
        Nq, Nk, d, Br, Bc, W = (arr(x) for x in (shape.Nq, shape.Nk, shape.d, tiles.Br, tiles.Bc, tiles.warps))
        causal = np.asarray(shape.causal, bool) & (Nq > 1)          # one query runs the non-causal kernel
        hd = rounded_head_dim(d)
        even = (Nq % Br == 0) & (Nk % Bc == 0)
        once_all = np.zeros(np.shape(Nq * Nk * hd), float)
        once_last, loop = once_all.copy(), once_all.copy()
        for (h, ev), (a, s, lp) in self.CODE_KIB.items():
            on = (hd == h) & (even == ev)
            once_all, once_last, loop = (np.where(on, a, once_all), np.where(on, s, once_last),
                                         np.where(on, lp, loop))
        known = causal & (arr(tiles.splits) == 1) & (once_all > 0)
        steps = cdiv(Br, Bc) + (~even).astype(np.int64)
        qblocks = cdiv(Nq, Br)
        # blocks of a head with at least `steps` key tiles: block i has min(ceil((i + 1) Br / Bc), ceil(Nk / Bc))
        full = np.where(cdiv(Nk, Bc) >= steps, np.maximum(qblocks - (steps - 1) * Bc // Br, 0), 0)
        once_kib = qblocks * once_all + full * once_last                  # per warp, summed over the head's blocks
        splits = arr(tiles.splits)
        fixed = np.where(splits > 1, self.SPLIT_BLOCK_INSTRUCTIONS, 0)
        c = dataclasses.replace(c, warp_other=c.warp_other + qblocks * splits * W * fixed,
                                path_fp32=c.path_fp32 + fixed)
        return dataclasses.replace(c, warp_once=np.where(known, W * once_kib * 1024 / 16, 0),
                                   code_once_kib=np.where(known, once_all + once_last, 0),
                                   code_loop_kib=np.where(known, loop, 0))

    def preset(self, gpu, d, causal):
        sm = gpu.sm if gpu is not None else "sm_90"
        optin = gpu.smem_per_block_optin_bytes if gpu is not None else 232448
        per_sm = gpu.smem_per_sm_bytes if gpu is not None else 233472
        return fa2_preset(d, causal, sm, optin, per_sm)

    def resolution_note(self, given, used):
        tiles = lambda t: [np.asarray(getattr(t, f)) for f in ("Br", "Bc", "warps")]
        splits = np.asarray(used.splits)
        if any(x.size != 1 for x in [splits, *tiles(given), *tiles(used)]) or splits.item() <= 1:
            return None                                                     # a sweep's arrays, or no split
        splits, asked, ran = splits.item(), *(tuple(x.item() for x in tiles(t)) for t in (given, used))
        return (f"{self.name}: the grid is small, so PyTorch runs FlashAttention's split-KV kernel with {splits} "
                f"splits and its own tiles {ran[0]}x{ran[1]}/{ran[2]}w"
                + (f" (not {asked[0]}x{asked[1]}/{asked[2]}w)" if asked != ran else ""))

    def resolve(self, gpu, shape, tiles):
        """The split-KV kernel when the grid is small (set_params_splitkv: 64-row tiles, 4 warps); the backward never
        splits."""
        if shape.mode != "fwd":
            return tiles
        shape = self.run_shape(shape)
        d = arr(shape.d)
        block_n = np.where(d <= 64, 256, np.where(d <= 128, 128, 64))
        bnm = arr(shape.B) * arr(shape.H) * cdiv(shape.Nq, 64)
        s = num_splits(bnm, 2 * gpu.sm_count, cdiv(shape.Nk, block_n))
        split = s > 1
        return SDPATiles(Br=np.where(split, 64, tiles.Br), Bc=np.where(split, block_n, tiles.Bc),
                         warps=np.where(split, 4, tiles.warps), splits=s)


class SDPACudnn(_SDPA):
    name = "sdpa-cudnn"
    description = ("PyTorch SDPA's cuDNN backend: a Hopper wgmma FlashAttention kernel, tiles and loop read off its "
                   "launch and SASS (cuDNN 9.19)")
    backend = "CUDNN_ATTENTION"
    # causal launch order: the persistent grid hands out tiles longest first (assumed, as FA3's tile scheduler)
    heavy_first = True
    # A KV step, read off the SASS and Nsight Compute's warp samples: each consumer warpgroup walks its chain (Q K^T,
    # a wait, its softmax, P V, a wait) and the named barriers 4 and 5 let one warpgroup run its softmax while the
    # other's GEMMs hold the tensor pipe (FlashAttention-3's ping-pong). A step of the pair costs both warpgroups'
    # GEMMs (2G) or one warpgroup's GEMMs and its softmax (G + S: half the MUFU and FP32 work and the chain's
    # latencies), whichever is longer; the rest (shared memory, issue) overlaps them. Nsight Compute puts the launch
    # of 32 queries against 32k keys (B 1 H 32 Hkv 8; research/data/h200/cudnn_sass/sdpa_dec_sass.tar.gz) at 2,650
    # cycles a step at d = 128 and 1,970 at d = 64, its once-run code included; the model gives 2,750 and 2,120.
    # Where its shared memory holds one K and one V stage (d = 192 and 256: STAGE_NOTE), a third bound: each
    # tile's K (V) copy starts when both warpgroups have released the one before and must land within one
    # warpgroup's PV (QK^T) GEMM, so a step lasts at least one warpgroup's GEMMs and both copies (G + 2 L).
    # A work tile's epilogue follows its last step whichever bound its steps take ("tail").
    serial = (("max", ("wgmma", "tail"), (("wgmma", 1 / 2), ("sfu", 1 / 2), ("fp32", 1 / 2), "latency", "tail"),
               (("wgmma", 1 / 2), "stage", "tail")),)
    # The backward's SASS (research/data/h200/cudnn_sass/, research/scripts/ncu_sdpa_launch.sh) has no such
    # ping-pong: its two consumer warpgroups meet at one named barrier (BAR.SYNC 6, 256 threads) twice a tile pair
    # and wait on their MMA groups 4-5 times a pair (WARPGROUP.DEPBAR), so they walk each phase together: a pair
    # costs both warpgroups' MMAs, the exponentials, the FP32 work of dP and dS and the chain's latencies, added.
    # Where its shared memory holds one Q/dO stage (d = 256), each pair's Q and dO copies wait for the pair before to
    # release them and its GEMMs wait on them: they add to the chain ("stage").
    serial_bwd = (("wgmma", "sfu", "fp32", "latency", "stage"),)
    # per score, read off the SASS's executed-instruction counts (d = 64 and 128): FMNMX, the scale FMUL, two FADDs
    # (68 FMNMX, 130 FADD, 99 / 132 FMUL with 32 / 64 of them O's rescale, per warp per tile of 64 scores a thread)
    elem_fp32 = 4
    # the launch's 168 registers and shared memory (per head dimension, at its 128 x 128 tiles): one block per SM
    arch = {"sm_90": ArchFacts(regs=168, source="the launch (research/data/h100/sdpa_kernels.json)",
                               overheads={"tile": 60, "kstep": 2, "mask_elem": 1})}
    LAUNCH_SMEM = {64: 134144, 128: 232448, 192: 232448, 256: 232448}

    # STAGE_NOTE: the K/V stages its shared memory holds beside the Q tile, three at d = 64 and 128, one at d = 192 and
    # 256 (at 256, Q, K and V tiles of 64 KB each in its 227 KB). Nsight Compute's profile of B 4 H 16 N 4096 d 256
    # beside d 128 (research/data/h200/cudnn_sass/sdpa_d256_sass.tar.gz) shows the same instructions a step but for the
    # MMAs and O's rescale, and 5,200 cycles a step against the 4,100 its MMAs take at the pipe's rate; its consumer
    # warps now sleep on the copies' barriers (NANOSLEEP.SYNCS, SYNCS.PHASECHK), which d = 128's never do. Nor can a
    # work tile's Q and first K and V tiles be fetched ahead: the profiles at N 1024, 2048 and 4096
    # (sdpa_d256_tiles_sass.tar.gz) give 11,400 cycles a tile beyond its 4,680 a step, against the 5,800 of its
    # epilogue, so those three copies count once a tile.
    def stages(self, shape, tiles, mode):
        """Pipeline stages the launch's shared memory holds of the tiles its loop streams, beside those it keeps:
        the forward streams K and V past its Q tile, the backward Q and dO past its K and V tiles."""
        dk, eb = self.kernel_head_dim(shape.d, tiles, mode), shape.element_bytes
        Br, Bc = arr(tiles.Br), arr(tiles.Bc)
        kept, streamed = (Br, 2 * Bc) if mode == "fwd" else (2 * Bc, 2 * Br)
        smem = arr(self.smem_bytes(dataclasses.replace(shape, mode=mode), tiles))
        return (smem - kept * dk * eb) // (streamed * dk * eb)

    def head_counts(self, shape, tiles, facts):
        """FA2's counts with the MMAs as warpgroup MMAs (same FLOPs). A warpgroup MMA reads its shared-memory
        operands once for the four warps (no per-warp ldmatrix): a quarter of FA2's operand traffic. On the chain,
        in place of FA2's dependent mma.sync steps (KQ + KP a KV tile, each an MMA's latency), two waits a KV tile:
        Q K^T's group of wgmmas, then P V's, each waited on whole (the wgmma chain probe: a group's MMAs pipeline,
        and its wait adds ~50 cycles beyond their pipe time, which the serial group holds)."""
        plain = c = super().head_counts(shape, tiles, facts)
        d, Bc = arr(shape.d), arr(tiles.Bc)
        groups = 2 * exposed_steps(c, d, Bc)                    # two MMA groups a step
        ld = c.warp_ldsm / 4
        # the producer warpgroup copies K and V stages ahead of the consumers (TMA): no tile load on their path
        # every call runs a memset (0.77 us in the profiler) before its kernel (examples/measurements/h100/
        # sdpa_calls.json): a second GPU operation queued in the call
        one_stage = self.stages(shape, tiles, "fwd") <= 1
        tiles_h, qtiles = kv_tiles(shape.Nq, shape.Nk, tiles.Br, tiles.Bc, shape.causal)
        first = (arr(tiles.Br) + 2 * Bc) * d * shape.element_bytes       # a work tile's Q and first K and V
        wg = dataclasses.replace(c, queued_ops=1, warp_wgmma=c.warp_mma, warp_mma=0 * c.warp_mma, warp_ldsm=0 * ld,
                                 stage_loads=np.where(one_stage, 2 * tiles_h + qtiles, 0),
                                 stage_bytes=np.where(one_stage, 2 * tiles_h * Bc * d * shape.element_bytes
                                                      + qtiles * first, 0),
                                 path_mma=0 * c.path_mma, path_wgmma=groups,
                                 smem_ld_wavefronts=4 * ld, smem_ld_bytes=512 * ld,
                                 path_load=0 * c.path_load, path_load_miss=0 * c.path_load_miss,
                                 load_steps=0 * c.path_load_miss,
                                 tail_cycles=qtiles * self.TILE_END_CYCLES * d / 128)
        # the one-query kernel: FA2's loop nest as it is, each warp a block of its own, and the block's end, which
        # that stand-in lacks (its four warps' rows merged through shared memory and written): DECODE_END_CYCLES
        one = dataclasses.replace(plain, path_cycle=self.DECODE_END_CYCLES + 0 * plain.path_gmem)
        return self._decode_twice_k(shape, tiles, one).where(self.decoding(tiles), wg)

    def _decode_twice_k(self, shape, tiles, c):
        """The d = 256 decode kernel reads each K tile twice (DECODE_TWICE_K): per step a second copy of the
        tile, found in L2 and waited on, and a second Q K^T on the chain."""
        wide = self.kernel_head_dim(shape.d) > 128
        if not np.any(wide):
            return c
        d, Br, Bc, eb = arr(shape.d), arr(tiles.Br), arr(tiles.Bc), shape.element_bytes
        tiles_h = kv_tiles(shape.Nq, shape.Nk, Br, Bc, False, tiles.splits)[0]
        kq = d // 16
        steps = exposed_steps(c, d, Bc)
        k_bytes, k_copies = tiles_h * Bc * d * eb, tiles_h * Bc * d * eb // 512
        twice = dataclasses.replace(
            c, warp_mma=c.warp_mma + tiles_h * (Br // 16) * (Bc // 8) * kq,
            warp_ldgsts=c.warp_ldgsts + k_copies, smem_st_wavefronts=c.smem_st_wavefronts + 4 * k_copies,
            smem_st_bytes=c.smem_st_bytes + k_bytes, gld_sectors=c.gld_sectors + k_bytes // 32,
            l2_read_bytes=c.l2_read_bytes + k_bytes, path_mma=c.path_mma + steps * kq,
            path_load=c.path_load + steps)
        return twice.where(wide, c)

    # Decode, one query: another kernel, read off its launch (cuDNN 9.19 on the H200, research/data/h200/
    # sdpa_workload_calls.json): ..._sdpa_sm80_flash_fprop_wmma_f16_knob_35_16x128x{d}_1x4x1..., 128 threads, 183
    # registers, 86336 bytes of shared memory at d = 128 and 45376 at 64 (two blocks an SM). The query heads of a
    # K/V head are the rows of its 16-row tile (grid y: Hkv ceil(G / 16)), its four warps split each 128-key tile
    # (mma.sync, 32 keys a warp), grid x splits the key range: min(key tiles, 64, 256 // (B Hkv ceil(G / 16)))
    # in every launch recorded (B 1 and 8; Hkv 32, 8, 1; 1k-128k keys); where it splits, a lean_reduction kernel
    # merges the splits (companions). Its warps share nothing but the tile's copy and a last merge of
    # their four partial rows in shared memory, so the model runs each warp as a block of its own (one warp, 16 rows,
    # 32 keys a step, a quarter of the shared memory: four times the splits) and the combine over the launch's own
    # splits. Two or more queries run the prefill kernel unfolded, as recorded.
    DECODE_ROWS, DECODE_KEYS, DECODE_WARPS = 16, 128, 4
    # its split count, as recorded (research/data/h200/decode_cudnn_calls.json beside sdpa_workload_calls.json):
    # min(DECODE_SLOTS // base, key tiles, 64) for base = B Hkv ceil(G / 16) row tiles (twice the slots at d = 256:
    # 8 splits where d <= 128 takes 4), and none once the row tiles reach DECODE_NO_SPLIT of the SMs (64 of them split
    # 4 ways, 128 not at all on 132 SMs; FlashAttention-2's num_splits_heuristic stops at 0.8 of the SMs, taken here)
    DECODE_SLOTS, DECODE_NO_SPLIT = 256, 0.8
    # at d = 256 its loop takes 64 keys a step, 16 a warp (its SASS: 16 iterations of 32 HMMAs a warp for 1,024 keys
    # a block, research/data/h200/cudnn_sass/sdpa_dec_sass3.tar.gz, sass_cudnn_dec1_d256.csv)
    DECODE_KEYS_D256 = 64
    # DECODE_TWICE_K: and it reads K twice. Nsight Compute's counts of that launch (B 8 H 32 Hkv 8 Nk 8192:
    # sdpa_dec_sass3) put 1.6 times the K and V bytes through L2 (860 MB for 537), DRAM reading them once: each 64-key
    # step copies its K tile (32 KB) in an inner loop of two passes and its V tile once, with 64 HMMAs a warp for Q K^T
    # and 32 for P V where one Q K^T takes 32; every copy is waited on in full (DEPBAR.LE SB0, 0x0: one stage, where d
    # <= 128 keeps one copy in flight), its warps' samples 47% at the barrier after a copy.
    # SM cycles of the code after its key loop (the merge and the partial row's write), read off Nsight Compute's
    # warp samples of one launch (B 1 H 32 Hkv 8 Nk 32k d 128: 3.4% of its samples, after the loop, of 66,415 cycles;
    # research/data/h200/cudnn_sass/sdpa_dec_sass2.tar.gz, sass_cudnn_dec1_long.csv)
    DECODE_END_CYCLES = 2300
    # SM cycles a work tile of the prefill kernel spends after its KV loop (O rescaled, converted and stored), at
    # d = 128, scaling with the O tile's columns: its consumer warps' samples after the loop, 2.97% of the N 512 launch's
    # 96,892 cycles (research/data/h200/cudnn_sass/sdpa_sass.tar.gz, sass_cudnn_fwd_plain.csv); at every SM busy the
    # N 5120 launches spend 3,000 (d 128) and 1,730 (d 64) cycles a tile outside their steps (sdpa_pad_sass.tar.gz:
    # elapsed cycles less 400 steps of the busiest SM at the profiled step)
    TILE_END_CYCLES = 2880

    def decoding(self, tiles):
        return (arr(tiles.warps) == 1) & (arr(tiles.Br) == self.DECODE_ROWS)

    def run_shape(self, shape):
        return fold_groups(shape)

    def resolve(self, gpu, shape, tiles):
        if shape.mode != "fwd":
            return tiles
        run, one = self.run_shape(shape), arr(shape.Nq) == 1
        base = arr(run.B) * arr(run.H) * cdiv(run.Nq, self.DECODE_ROWS)
        wide = self.kernel_head_dim(shape.d) > 128
        slots = np.where(wide, 2 * self.DECODE_SLOTS, self.DECODE_SLOTS)
        s = np.clip(np.minimum(slots // np.maximum(base, 1), cdiv(run.Nk, self.DECODE_KEYS)), 1, 64)
        s = np.where(base >= self.DECODE_NO_SPLIT * gpu.sm_count, 1, s)
        W = self.DECODE_WARPS
        keys = np.where(wide, self.DECODE_KEYS_D256, self.DECODE_KEYS)
        return SDPATiles(Br=np.where(one, self.DECODE_ROWS, tiles.Br),
                         Bc=np.where(one, keys // W, tiles.Bc), warps=np.where(one, 1, tiles.warps),
                         splits=np.where(one, W * s, 1))

    def resolution_note(self, given, tiles):
        """What a one-query problem runs instead of the asked tiles."""
        splits = np.asarray(tiles.splits) // self.DECODE_WARPS
        if not np.any(self.decoding(tiles)):
            return ""
        return ("one query: cuDNN's decode kernel (16 rows of folded query heads x 128 keys, four warps along the "
                "keys)" + (f", {splits.item()} splits" if splits.size == 1 else ", its own split count"))

    def companions(self, shape, tiles, facts):
        """A split launch's lean_reduction kernel (its launch: one 256-thread block a (b, query head), 32
        registers): it reads each split's fp32 log-sum-exp, then every split's fp32 partial row at once (two
        dependent round trips: its threads hold all the splits' loads in flight), and writes the row."""
        if shape.mode != "fwd":
            return super().companions(shape, tiles, facts)
        s = arr(tiles.splits) // self.DECODE_WARPS
        on = self.decoding(tiles) & (s > 1)
        if not np.any(on):
            return ()
        rows = np.asarray(shape.heads, float) * arr(shape.Nq)
        d = arr(shape.d)
        per_thread = s * (d + 1) / 256
        comb = backward.stream_companion(f"{self.name}:combine", np.where(on, rows * s * (d + 1) * 4, 0),
                                         np.where(on, rows * d * shape.element_bytes, 0),
                                         np.where(on, rows * 256, 0), (per_thread, d / 256), 3 * per_thread,
                                         round_trips=2)
        c = dataclasses.replace(comb.counts, queued_ops=np.where(on, 1, 0), path_gmem=np.where(on, 2, 0))
        return (dataclasses.replace(comb, counts=c),)

    # Causal with Nq != Nk (bottom-right, torch.nn.attention.bias.causal_lower_right): PyTorch hands cuDNN the
    # mask materialised (CausalBias._dispatch materialises it for every backend but flash and efficient), as the
    # launch record shows: five small kernels build an (Nq, Nk) additive bf16 bias (fill, triu, two fills, where),
    # and the attention kernel walks every tile, none skipped, adding the bias tile it reads (one copy for every
    # head, read from DRAM once).
    MASK_OPS = 5
    # The same kernel built with the bias, against itself without (Nsight Compute, B 2 H 16 Nq 512 Nk 4096 d 128:
    # research/data/h200/cudnn_sass/, ncu_cudnn_fwd_masked and _plain): 15.7M more warp instructions, 7.46 a score
    # a thread. Each consumer thread loads its scores' bias itself, 4 bytes (two scores) an LDG.E.CONSTANT, 7.75 L2
    # sectors a warp's load (its 8 rows), and unpacks, addresses and adds them (IMAD 1.90, LEA 1.03, PRMT 1.00, FFMA
    # 1.00, ISETP 0.52, SHF 0.25, VIADD 0.21, MOV 0.17, IADD3 0.16 ...: 6.33 a score), spilling registers to do so
    # (LDL 0.25, STL 0.23 a score). The ping-pong barriers stay, but this work sits in the warpgroup's softmax
    # phase, where the warp issues alone (its partner warpgroup is in its GEMMs): there it issues an instruction
    # every 5.2 cycles against 3.1 without the bias, so the model puts the bias work on the step's chain, each ALU
    # instruction at the FP32 latency, each spill reload at an L1 hit's, and one L2 round trip for the loads. At d = 64
    # the same pair of launches (sdpa_mask_d64_sass.tar.gz) adds the same work but no spills (6.83 a score, no LDL or
    # STL): its O tile leaves the registers room.
    MASK_ALU, MASK_LDG, MASK_LDL, MASK_STL, MASK_OTHER = 6.33, 0.516, 0.253, 0.226, 0.16   # a score, a thread
    MASK_LDG_SECTORS = 7.75

    # Head dims: each kernel's name carries the head dim it computes at, 64, 128 or 256 (the H200's record: d 32 runs
    # ..._64x128x64, d 80 and 96 ..._64x128x128, d 256 ..._64x128x256; the backward and the decode kernel alike), and
    # the prefill kernel 192 as well (d 160 and 192 run ..._64x128x192, d 200 ..._64x128x256, the decode kernel
    # ..._16x128x256 at all three: research/data/h200/headdims3_calls.json). Its MMAs and their operands run at that
    # head dim; what it reads and writes in global memory is the tensors'. The backward was recorded at 32-256 only
    # (none at 160-224): taken as the decode kernel's.
    KERNEL_HEAD_DIMS = (64, 128, 256)
    PREFILL_HEAD_DIMS = (64, 128, 192, 256)

    # Its 256-wide decode kernel waits on each tile copy in full (one stage, DECODE_TWICE_K), its copies issued for
    # every column chunk of the kernel's width: a step waits as a full-width copy, though DRAM moves only the tensor's
    # bytes. Its launches at d 160, 192 and 200 (B 4 H 32 Hkv 8 Nk 8192: 83, 86 and 96 us, research/data/h200/
    # headdims3_calls.json) take no less for their narrower rows.
    def full_width_waits(self, tiles, dk):
        return self.decoding(tiles) & (dk > 128)

    def kernel_head_dim(self, d, tiles=None, mode="bwd"):
        d = arr(d)
        dims = np.select([d <= h for h in self.KERNEL_HEAD_DIMS], self.KERNEL_HEAD_DIMS, 256)
        if mode != "fwd" or tiles is None:
            return dims
        prefill = np.select([d <= h for h in self.PREFILL_HEAD_DIMS], self.PREFILL_HEAD_DIMS, 256)
        return np.where(self.decoding(tiles), dims, prefill)

    # Keys that do not fill the last 128-key tile: the plain kernel then masks every score of every tile against the
    # key count, not the last tile's alone. Nsight Compute's counts of the same launch at N 5000 against 5120 (B 2
    # H 16, 40 x 40 tiles both, d 64 and 128: research/data/h200/cudnn_sass/sdpa_pad_sass.tar.gz) show 2.04-2.07
    # more warp instructions a score a thread (SEL 1.00, ISETP 0.50, VIADD 0.39-0.49, IMAD, IADD3 ...), all of them
    # ALU work in the softmax phase, and 12-14% more cycles a step: 1.1-1.3 cycles for each added instruction of the
    # two consumer warpgroups, whose softmax phases take turns. So both warpgroups' share lies on the step's chain at
    # one issue cycle an instruction (a warp issuing alone). The causal kernel, whose ragged key tile is a diagonal
    # one it masks anyway, adds 0.1 an instruction a score there (d 64, the same pair of launches): none is priced.
    PAD_ALU = 2.05

    def _own_counts(self, shape, tiles, facts):
        c = self._bias_counts(shape, tiles, facts)
        if shape.mode != "fwd":
            return c
        ragged = (arr(shape.Nk) % arr(tiles.Bc) != 0) & ~self.decoding(tiles) & ~np.asarray(shape.causal, bool)
        if not np.any(ragged):
            return c
        warp, steps, per_thread = self._every_score(shape, tiles, c)
        padded = dataclasses.replace(c, warp_other=c.warp_other + warp * self.PAD_ALU,
                                     path_cycle=c.path_cycle + 2 * steps * per_thread * self.PAD_ALU)
        return padded.where(ragged, c)

    @staticmethod
    def _every_score(shape, tiles, c):
        """For work done on every score of every tile, whole: (the warp instructions one instruction a score makes;
        a block's exposed KV steps on its chain, two MMA groups a step in head_counts; a consumer thread's share of a
        tile's scores)."""
        Nq, Nk, Br, Bc = (arr(x) for x in (shape.Nq, shape.Nk, tiles.Br, tiles.Bc))
        warp = np.asarray(shape.heads, float) * cdiv(Nq, Br) * cdiv(Nk, Bc) * Br * Bc / 32
        return warp, c.path_wgmma / 2, Br * Bc / (arr(tiles.warps) * 32)

    def _bias_counts(self, shape, tiles, facts):
        c = super()._own_counts(shape, tiles, facts)
        if shape.mode != "fwd" or not shape.causal:
            return c
        masked = (arr(shape.Nq) != arr(shape.Nk)) & (arr(shape.Nq) > 1)
        if not np.any(masked):
            return c
        full = super()._own_counts(dataclasses.replace(shape, causal=False), tiles, facts)
        Nq, Nk = arr(shape.Nq), arr(shape.Nk)
        warp, steps, per_thread = self._every_score(shape, tiles, full)
        spills = np.where(self.kernel_head_dim(shape.d, tiles, "fwd") > 64, 1.0, 0.0)       # none at d = 64
        ldl, stl = spills * self.MASK_LDL, spills * self.MASK_STL
        bias = dataclasses.replace(
            full, l2_read_bytes=full.l2_read_bytes + warp * self.MASK_LDG * self.MASK_LDG_SECTORS * 32,
            dram_read_once=full.dram_read_once + Nq * Nk * 2,
            warp_fp32=full.warp_fp32 + warp * self.MASK_ALU, warp_ldg=full.warp_ldg + warp * self.MASK_LDG,
            warp_other=full.warp_other + warp * (ldl + stl + self.MASK_OTHER),
            path_fp32=full.path_fp32 + steps * per_thread * self.MASK_ALU,
            path_local=full.path_local + steps * per_thread * ldl, path_gmem=full.path_gmem + steps,
            queued_ops=full.queued_ops + self.MASK_OPS)
        return bias.where(masked, c)

    def constraints(self, gpu, shape, tiles):
        """FA2's tensor-core limits, and Hopper: the preset is cuDNN's sm_90 kernel (warpgroup MMAs fed by TMA), which
        no other architecture runs (cuDNN picks other kernels there, which nothing here describes)."""
        return super().constraints(gpu, shape, tiles) + [
            (np.asarray(gpu.sm == "sm_90"), f"models cuDNN's Hopper kernel (wgmma, TMA: sm_90); {gpu.name} is "
                                            f"{gpu.sm}")]

    def smem_bytes(self, shape, tiles):
        """The launch's shared memory at its own 128 x 128 tiles (K/V stages beyond one tile each); else one Q and
        one K and V tile."""
        if shape.mode != "fwd":          # (assumed: at d = 256 it holds one Q/dO stage less, to fit a block)
            return np.minimum(super().smem_bytes(shape, tiles), 232448)
        d, Br, Bc = self.kernel_head_dim(shape.d, tiles, shape.mode), arr(tiles.Br), arr(tiles.Bc)
        # the decode kernel's, a quarter a warp: 45376 bytes at d = 64, 86336 at 128, and on that line elsewhere
        decode = (640 * d + 4416) / self.DECODE_WARPS
        seen = np.zeros(np.shape(d), np.int64)
        for hd, b in self.LAUNCH_SMEM.items():
            seen = np.where(d == hd, b, seen)
        return np.where(self.decoding(tiles), decode,
                        np.where((seen > 0) & (Br == 128) & (Bc == 128), seen, super().smem_bytes(shape, tiles)))

    def preset(self, gpu, d, causal):
        """(Br, Bc, consumer warps): the launch's 128 x 128 tiles, its two consumer warpgroups (the producer
        warpgroup computes nothing), at every head dim recorded (32-256)."""
        return 128, 128, 8


KERNELS = (register(SDPAFlash()), register(SDPACudnn()))
