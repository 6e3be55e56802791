"""The backward pass's loop nests (FlashAttention-2's Algorithm 2, seed 004): counts of the bundled fa2_tc backward
and of the SDPA presets' backwards. Not written yet: every entry point refuses in one line."""

from __future__ import annotations

from perfmodel.errors import InputError


def head_counts(kernel, shape, tiles, facts):
    raise InputError(f"kernel {kernel.name}: the backward's model is not written yet")


def companions(kernel, shape, tiles, facts):
    raise InputError(f"kernel {kernel.name}: the backward's model is not written yet")


def counts(kernel, shape, tiles, facts):
    raise InputError(f"kernel {kernel.name}: the backward's model is not written yet")
