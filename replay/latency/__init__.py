"""Inference latency benchmark of a baseline vs a candidate model on replayed inputs."""
