"""Grafana dashboards, alert rules and provisioning as code (docs/dashboards.md, docs/alerting.md)."""
