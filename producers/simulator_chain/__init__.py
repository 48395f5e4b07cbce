"""Chain-replication (view manager, wedges, (epoch, pos) CAS) fleet simulator: seeded,
clock-injected, with the fault catalogue of docs/families.md 4.7. The API is parallel to
``replimon.producers.simulator``."""

from replimon.producers.fleet_run import FaultSpec, Injection, SimSummary, parse_duration_ms
from replimon.producers.simulator.fleet import DEFAULT_START_MS, JsonlSink
from replimon.producers.simulator_chain.faults import (
    CATALOGUE,
    IMPLIED,
    parse_injection,
)
from replimon.producers.simulator_chain.fleet import SimOptions, Simulator

__all__ = [
    "CATALOGUE",
    "DEFAULT_START_MS",
    "IMPLIED",
    "FaultSpec",
    "Injection",
    "JsonlSink",
    "SimOptions",
    "SimSummary",
    "Simulator",
    "parse_duration_ms",
    "parse_injection",
]
