"""The four dashboards, one module each (docs/dashboards.md)."""
