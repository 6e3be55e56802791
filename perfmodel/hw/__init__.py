"""Hardware: GPU specs, calibration, the ceilings policy, occupancy and shared-memory banks."""
