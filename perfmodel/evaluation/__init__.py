"""Evaluation: measurement sets, validation against them, fitting path costs, and sweeps."""
