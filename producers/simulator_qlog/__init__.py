"""Quorum-log (halon replicated-log) fleet simulator: seeded, clock-injected, with the fault
catalogue of docs/families.md 3.7. The API is parallel to ``replimon.producers.simulator``."""

from replimon.producers.fleet_run import FaultSpec, Injection, SimSummary, parse_duration_ms
from replimon.producers.simulator.fleet import DEFAULT_START_MS, JsonlSink
from replimon.producers.simulator_qlog.faults import (
    CATALOGUE,
    IMPLIED,
    parse_injection,
)
from replimon.producers.simulator_qlog.fleet import SimOptions, Simulator

__all__ = [
    "CATALOGUE",
    "DEFAULT_START_MS",
    "FaultSpec",
    "IMPLIED",
    "Injection",
    "JsonlSink",
    "SimOptions",
    "SimSummary",
    "Simulator",
    "parse_duration_ms",
    "parse_injection",
]
