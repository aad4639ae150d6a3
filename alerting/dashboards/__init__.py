"""Grafana dashboards as code and their push to a Grafana server."""
