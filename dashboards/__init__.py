"""Grafana dashboards, alert rules and provisioning as code (issue 5; docs/dashboards.md)."""
