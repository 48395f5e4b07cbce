"""Spark Structured Streaming job (docs/streaming.md). The monitor rules it carries live in replimon.core."""
