"""Generations (Postgres multimaster) fleet simulator: seeded, clock-injected, with the fault
catalogue of docs/families.md 2.7. The API is parallel to ``replimon.producers.simulator``."""

from replimon.producers.fleet_run import FaultSpec, Injection, SimSummary, parse_duration_ms
from replimon.producers.simulator.fleet import DEFAULT_START_MS, JsonlSink
from replimon.producers.simulator_gen.faults import (
    CATALOGUE,
    parse_injection,
)
from replimon.producers.simulator_gen.fleet import SimOptions, Simulator

__all__ = [
    "CATALOGUE",
    "DEFAULT_START_MS",
    "FaultSpec",
    "Injection",
    "JsonlSink",
    "SimOptions",
    "SimSummary",
    "Simulator",
    "parse_duration_ms",
    "parse_injection",
]
