"""Building, checking and timing the bundled CUDA kernels (needs the optional ``gpu`` extra: torch, ninja)."""
