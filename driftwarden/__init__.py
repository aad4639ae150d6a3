"""driftwarden: streaming drift monitoring for ML model features on Apache Flink."""

__version__ = "0.1.0"
