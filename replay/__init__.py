"""Incident replay: re-read a topic or archive, re-run the analysis, report; latency benchmark."""
