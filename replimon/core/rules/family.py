"""The one interface between the group monitor and a protocol family's rules (``FamilyRules``).

The group monitor keeps what every family shares: admission (each node's order, duplicates,
holds, EVENTS_LOST, INCOMPLETE_HISTORY), the group clock and watermark, alert emission and ids,
and the liveness rules of ``rules/liveness.py`` (NODE_SILENT, GROUP_SILENT, QUORUM_*; the family
runs NO_PROGRESS and EXECUTOR_LAG with its own frontiers). Everything else is the family's, behind
this interface: it takes the admitted events of its types, says who is expected to publish and
whose majority must be live, gives its held verdicts and wedges at each evaluation, and its part
of the snapshot and of the saved state.

A group's family is the family of its first accepted event (``family_of``), or pinned by
configuration; it never changes for the group (docs/contract.md, "Protocol families").
"""

from __future__ import annotations

from fnmatch import fnmatchcase
from typing import Any, ClassVar, Protocol

from replimon.core.rules.base import Handler

XCOM = "xcom"


def family_of(event_type: str) -> str:
    """The family an event type belongs to: ``<family>.<kind>`` types are namespaced; the four
    unprefixed types of contract v1 are XCom's."""
    dot = event_type.find(".")
    return XCOM if dot < 0 else event_type[:dot]


def pinned(group: str, pins: tuple[tuple[str, str], ...]) -> str | None:
    """The family configuration pins ``group`` to (``families:``, group id or glob -> family; the
    first match wins), or None."""
    for pattern, family in pins:
        if pattern == group or fnmatchcase(group, pattern):
            return family
    return None


class FamilyRules(Protocol):
    """What the group monitor asks of a protocol family's rules (module docstring)."""

    name: ClassVar[str]  # the family: "xcom", ...
    types: ClassVar[frozenset[str]]  # the event types it takes
    # whether the heartbeats' ``suspects`` count for QUORUM_* (silence always does)
    suspicions: ClassVar[bool]

    @property
    def trusted(self) -> bool:
        """The family's view of the group is known to match the group (history complete enough)."""

    @property
    def decided(self) -> int:
        """The group's decided frontier where the family has one (-1: none yet or none at all)."""

    def handlers(self) -> tuple[dict[str, Handler], Handler]:
        """Who takes an admitted event of each type, in each node's order, and who takes the rest."""

    def members(self) -> tuple[str, ...] | None:
        """The members expected to publish (NODE_SILENT); None until the family knows them."""

    def quorum_set(self) -> tuple[tuple[str, ...], int] | None:
        """The members whose majority must be live, and that majority (QUORUM_*); None: unknown
        or not applicable. A member is not live when NODE_SILENT judges it silent, or, where
        ``suspicions`` is set, when a majority of the members suspect it."""

    def deadline(self) -> int | None:
        """The outside-clock time at which a wedge that holds now would open (joins the group's
        ``next_timer``, so it fires with no input at all), or None."""

    def settle(self, *, final: bool = False) -> None:
        """Give the verdicts held back for more input that are due (``final``: all of them)."""

    def evaluate(self) -> None:
        """The family's part of an evaluation (after NODE_SILENT and the quorum): its wedges, the
        frontier rules with its frontiers, pruning."""

    def flush(self) -> None:
        """End of input: nothing held back can be completed any more."""

    def snapshot(self) -> dict[str, Any]:
        """The family's part of the group's snapshot."""

    def dump(self, shared: dict[str, Any]) -> dict[str, Any]:
        """The whole saved state as plain JSON values: ``shared`` (the codec's keys) with the
        family's own, in the family's stored order (``replimon.core.codec``)."""

    def load(self, d: dict[str, Any]) -> None:
        """Restore ``dump``'s keys of ``d`` into this freshly built object."""
