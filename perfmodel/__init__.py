"""perfmodel: a mechanistic performance model for FlashAttention kernels on NVIDIA GPUs."""

from perfmodel.errors import InputError

__version__ = "0.1.0"
__all__ = ["InputError", "__version__"]
