"""Kernel models, one module each, registered by name (see base.py for the interface every kernel provides).

Adding a kernel: write ``perfmodel/kernels/<name>.py`` with a ``Kernel`` subclass and ``register(...)`` it,
put its CUDA source in ``csrc/``, and import the module below. Nothing else names a kernel.
"""

from perfmodel.kernels.base import REGISTRY, ArchFacts, Kernel, Launch, Tiles, get, register
from perfmodel.kernels import fa1, fa2, fa2_tc, sdpa  # noqa: F401  (registration)

DEFAULT = "fa1"              # the kernel of seed 000, which commands use when none is named

__all__ = ["DEFAULT", "REGISTRY", "ArchFacts", "Kernel", "Launch", "Tiles", "get", "register", "names"]


def names() -> list[str]:
    return list(REGISTRY)
