"""perfmodel: a mechanistic performance model for FlashAttention kernels on NVIDIA GPUs.

The Python API is ``predict`` and ``sweep`` (see perfmodel.api); the command line is ``perfmodel``."""

from perfmodel.errors import InputError
from perfmodel.api import predict, sweep
from perfmodel.llm import llm
from perfmodel.shape import AttentionShape

__version__ = "0.1.0"
__all__ = ["InputError", "AttentionShape", "predict", "sweep", "llm", "__version__"]
