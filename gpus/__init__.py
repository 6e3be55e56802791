"""GPU spec files (YAML). Shipped inside the wheel as the package ``perfmodel.gpus``."""
