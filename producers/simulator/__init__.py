"""XCom fleet simulator: seeded, clock-injected, with a catalogue of named faults."""

from replimon.producers.fleet_run import FaultSpec, Injection, SimSummary, parse_duration_ms
from replimon.producers.simulator.faults import (
    CATALOGUE,
    parse_injection,
)
from replimon.producers.simulator.fleet import (
    DEFAULT_START_MS,
    JsonlSink,
    SimOptions,
    Simulator,
)

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
