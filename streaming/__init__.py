"""Spark Structured Streaming job (issue 4). The monitor rules it carries live in replimon.core."""
