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

from collections.abc import Iterator

from replimon.producers.simulator.consensus import decide, execute, learn, prune
from replimon.producers.simulator.membership import background, node_lifecycle
from replimon.producers.simulator.model import Wait
from replimon.producers.simulator.publishing import (
    config_event,
    decision_event,
    heartbeats,
    publish,
)
from replimon.producers.simulator.state import GroupState


class GroupSim(GroupState):
    """One group of the fleet: its state (:class:`GroupState`), the tick and the script runner."""

    _booted = False

    def after(self, ms: int) -> Wait:
        """A wait that turns true ``ms`` from now."""
        deadline = self.t + ms
        return lambda: self.t >= deadline

    def start_script(self, script: Iterator[Wait]) -> None:
        """Run a fault script up to its first wait."""
        self.scripts.append(script)
        self._advance(script)

    def _advance(self, script: Iterator[Wait]) -> None:
        try:
            wait = next(script)
        except StopIteration:
            self.scripts.remove(script)
            return
        self.waiting.append((script, wait))

    def _run_scripts(self) -> None:
        ready = [(s, w) for s, w in self.waiting if w()]
        for item in ready:
            self.waiting.remove(item)
            self._advance(item[0])

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
