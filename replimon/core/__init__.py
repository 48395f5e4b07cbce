"""The monitor core: every rule of docs/rules.md over contract-v1 events, pure Python.

Standard library only: no I/O, no clock, no Spark. The streaming job, ``replimon check`` and the
benchmarks drive the same code.

* ``group``     ``GroupMonitor``: one group's entry points (``on_event``, ``on_timer``,
                ``next_timer``, ``flush``, ``snapshot``, ``to_state``/``from_state``)
* ``fleet``     ``Monitor``: many groups under one outside clock
* ``codec``     the state as plain JSON values and back (``STATE_VERSION``)
* ``rules``     the rules, as components over one shared context
* ``configmap`` XCom's configuration map and the rules that grow it
* ``alerts``    the alert kinds, ids and record; ``limits``: the thresholds
"""

from __future__ import annotations

from replimon.core.alerts import KINDS, Alert, alert_id
from replimon.core.codec import STATE_VERSION
from replimon.core.configmap import Command, Config, ConfigMap, Outcome, Rules
from replimon.core.fleet import Monitor
from replimon.core.group import GroupMonitor
from replimon.core.limits import Limits

__all__ = [
    "KINDS",
    "STATE_VERSION",
    "Alert",
    "Command",
    "Config",
    "ConfigMap",
    "GroupMonitor",
    "Limits",
    "Monitor",
    "Outcome",
    "Rules",
    "alert_id",
]
