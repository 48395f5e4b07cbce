"""One simulated XCom group, advanced tick by tick, with the fault scripts running in it.

A discrete-time model: :meth:`GroupSim.tick` runs one tick's steps in a fixed order (fault
scripts, node lifecycle, background churn, decide, learn, execute, heartbeats, prune), each step
in the module that owns it: ``membership.py`` (who is in the group), ``consensus.py`` (the log),
``publishing.py`` (what nodes publish). The state they share and its queries are
:class:`replimon.producers.simulator.state.GroupState`; `docs/simulator.md` "Model" describes the
whole.

Guarantees: every time comes from the tick clock and everything random from the group's own seeded
``random.Random``, so a run is reproducible to the byte. Fault scripts (``faults.py``) are
generators of waits; a script resumes, at the start of a tick, once the wait it yielded is true, and
while any script runs the group's background restarts and reconfigurations pause.
"""

from __future__ import annotations

from replimon.producers.fleet_run import Scripted
from replimon.producers.simulator.consensus import decide, execute, learn, prune
from replimon.producers.simulator.membership import background, node_lifecycle
from replimon.producers.simulator.publishing import (
    config_event,
    decision_event,
    heartbeats,
    publish,
)
from replimon.producers.simulator.state import GroupState


class GroupSim(GroupState, Scripted):
    """One group of the fleet: its state (:class:`GroupState`), the tick and the script runner."""

    _booted = False


    def tick(self, t: int) -> None:
        """Advance the group to time ``t`` (ms since the run's start)."""
        self.t = t
        if not self._booted:
            self._booted = True
            for node in self.nodes.values():  # every founding member learns and runs the boot
                decision_event(self, node, self.blocks[0])
                config_event(self, node, self.commands[0])
                publish(self, node, "execution", {"executed": 0})
        self._run_scripts()
        node_lifecycle(self)
        background(self)
        decide(self)
        learn(self)
        execute(self)
        heartbeats(self)
        prune(self)
