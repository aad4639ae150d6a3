"""Alert rules, outbox, webhook delivery, Prometheus metrics and Grafana dashboards."""
