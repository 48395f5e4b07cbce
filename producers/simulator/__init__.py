"""XCom fleet simulator: seeded, clock-injected, with a catalogue of named faults."""

from replimon.producers.fleet_run import parse_duration_ms
from replimon.producers.simulator.faults import (
    CATALOGUE,
    FaultSpec,
    Injection,
    parse_injection,
)
from replimon.producers.simulator.fleet import (
    DEFAULT_START_MS,
    JsonlSink,
    SimOptions,
    SimSummary,
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
