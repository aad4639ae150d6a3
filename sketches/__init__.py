"""Mergeable feature sketches, gate distances, deep tests and threshold calibration (no I/O)."""
