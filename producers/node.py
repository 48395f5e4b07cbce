"""What a replica integration holds for ONE node of one group (``NodePublisher``): the envelope
(``v``, ``ts_ms``, ``seq``, ``incarnation``), one method per event type (XCom's, and the
generations family's ``gen_*``, the quorum-log family's ``qlog_*``, the chain family's
``chain_*``), each event validated
against the contract before it leaves the process, and sent through a shared ``Publisher``
(``publisher.py``, which documents the exceptions and thread-safety)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any

from pydantic import BaseModel, ValidationError

from replimon.contract import Execution, Invalid, decode_event
from replimon.contract.parse import reason_of
from replimon.producers.publisher import Publisher, encode_event, wall_clock_ms


def _plain(value: Any) -> Any:
    """Pydantic models (View, Member, ConfigCommand...) as the JSON objects of the contract."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", exclude_none=True)
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


class NodePublisher:
    """The events of ONE node of one group: envelope, sequence numbers, validation.

    ``seq`` counts 0, 1, 2, ... within an incarnation and is consumed only when the publisher
    accepted the event: an invalid event (:class:`ValueError`) or a :class:`BufferFull` leaves
    the next event with the same number, so the monitor sees no gap. Every method returns the
    event dict exactly as it went on the wire.
    """

    def __init__(
        self,
        publisher: Publisher,
        group: str,
        node: str,
        incarnation: int = 0,
        clock: Callable[[], int] = wall_clock_ms,
    ) -> None:
        _check_envelope(group, node, incarnation)
        self.publisher = publisher
        self.group = group
        self.node = node
        self._incarnation = incarnation
        self._seq = 0
        self._clock = clock
        self._lock = threading.Lock()

    @property
    def incarnation(self) -> int:
        return self._incarnation

    @property
    def next_seq(self) -> int:
        """The ``seq`` the next event will carry."""
        return self._seq

    def restart(self, incarnation: int | None = None) -> int:
        """Start a new incarnation (default: the previous one + 1); ``seq`` restarts at 0.

        An explicit ``incarnation`` must be greater than the current one: reusing a number would
        make the monitor drop the new events as duplicates.
        """
        with self._lock:
            new = self._incarnation + 1 if incarnation is None else incarnation
            _check_envelope(self.group, self.node, new)
            if new <= self._incarnation:
                raise ValueError(f"incarnation must grow: {new} after {self._incarnation}")
            self._incarnation = new
            self._seq = 0
            return new

    def decision(
        self,
        instance: int,
        proposer: str,
        kind: str,
        count: int = 1,
        digest: str | None = None,
        window_base: int | None = None,
        config: Mapping[str, Any] | BaseModel | None = None,
    ) -> dict[str, Any]:
        """This node learned the decision of ``instance`` (or of a run of ``count``)."""
        return self._publish(
            "decision",
            instance=instance,
            count=count,
            proposer=proposer,
            kind=kind,
            digest=digest,
            window_base=window_base,
            config=config,
        )

    def execution(self, executed: int) -> dict[str, Any]:
        """This node's last executed instance."""
        return self._publish("execution", executed=executed)

    def heartbeat(
        self,
        executed: int,
        decided: int,
        protocol: int,
        status: str,
        view: Mapping[str, Any] | BaseModel | None = None,
        cache_size: int | None = None,
        suspects: list[str] | None = None,
        version: str | None = None,
    ) -> dict[str, Any]:
        """This node's periodic report of where it stands."""
        return self._publish(
            "heartbeat",
            executed=executed,
            decided=decided,
            protocol=protocol,
            status=status,
            view=view,
            cache_size=cache_size,
            suspects=suspects,
            version=version,
        )

    def config(
        self,
        instance: int,
        outcome: str,
        start: int | None = None,
        event_horizon: int | None = None,
        members: list[Any] | None = None,
        reason: str | None = None,
    ) -> dict[str, Any]:
        """This node executed the config command decided at ``instance``: installed or refused."""
        return self._publish(
            "config",
            instance=instance,
            outcome=outcome,
            start=start,
            event_horizon=event_horizon,
            members=members,
            reason=reason,
        )

    # -- the generations family (Postgres multimaster; docs/families.md 2.2) --------------------
    def gen_state(
        self,
        cause: str,
        gen: Mapping[str, Any],
        donors: list[str],
        last_online_in: int,
        last_vote: Mapping[str, Any],
        status: str,
        via: str | None = None,
        source: str | None = None,
        vote: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """A completed transition of this node's persisted generation state (``cause``: load,
        switch, online, vote or bump), published after the change it reports; ``gen`` and
        ``last_vote`` are ``{num, members, configured}``."""
        return self._publish("gen.state", cause=cause, gen=gen, donors=donors, last_online_in=last_online_in,
                             last_vote=last_vote, status=status, via=via, source=source, vote=vote)

    def gen_heartbeat(
        self,
        gen_num: int,
        last_online_in: int,
        last_vote_num: int,
        node_status: str,
        suspects: list[str],
        xact_sample: int,
    ) -> dict[str, Any]:
        """This node's periodic report: the same numbers, its status and whom it suspects."""
        return self._publish("gen.heartbeat", gen_num=gen_num, last_online_in=last_online_in,
                             last_vote_num=last_vote_num, node_status=node_status, suspects=suspects,
                             xact_sample=xact_sample)

    def gen_xact(
        self,
        gid: str,
        xgen: int,
        phase: str,
        role: str,
        mode: str | None = None,
        at: Mapping[str, Any] | None = None,
        prepared_by: list[str] | None = None,
        xmembers: list[str] | None = None,
    ) -> dict[str, Any]:
        """A sampled two-phase transaction's step on this node (prepared, committed, aborted)."""
        return self._publish("gen.xact", gid=gid, xgen=xgen, phase=phase, role=role, mode=mode, at=at,
                             prepared_by=prepared_by, xmembers=xmembers)

    # -- the quorum-log family (a Paxos replicated log with reconfiguration; docs/families.md 3.2)
    def qlog_decree(
        self,
        num: int,
        kind: str,
        digest: str,
        outcome: str = "executed",
        leg: int | None = None,
        new_leg: int | None = None,
        members: list[str] | None = None,
    ) -> dict[str, Any]:
        """This replica's watermark passed decree ``num``: it executed it, or (a Reconf opening no
        newer legislature) skipped it. ``leg`` None: a teleported decree (legislature unknown);
        ``new_leg`` and ``members`` with ``kind`` "reconf" only (the head leads)."""
        return self._publish("qlog.decree", num=num, leg=leg, kind=kind, digest=digest, outcome=outcome,
                             new_leg=new_leg, members=members)

    def qlog_passed(
        self,
        num: int,
        leg: int,
        ballot: Mapping[str, Any],
        acceptors: list[str],
        acked: list[str],
        kind: str,
        digest: str,
        recovery: bool = False,
        new_leg: int | None = None,
        members: list[str] | None = None,
    ) -> dict[str, Any]:
        """This proposer's round for decree ``(leg, num)`` succeeded: ``ballot`` is ``{n,
        proposer}``, ``acked`` the acceptors whose phase-2 acks it counted."""
        return self._publish("qlog.passed", num=num, leg=leg, ballot=ballot, acceptors=acceptors, acked=acked,
                             kind=kind, digest=digest, new_leg=new_leg, members=members, recovery=recovery)

    def qlog_recover(
        self,
        phase: str,
        leg: int,
        old: list[str],
        new: list[str],
        relocated: list[Mapping[str, str]] | None = None,
        synced_with: list[str] | None = None,
    ) -> dict[str, Any]:
        """This replica serves a Recover request: ``started``, ``synced`` (with ``synced_with``)
        or ``failed``; ``relocated`` lists ``{node, from}`` new replicas seeded from old ones."""
        return self._publish("qlog.recover", phase=phase, leg=leg, old=old, new=new, relocated=relocated,
                             synced_with=synced_with)

    def qlog_heartbeat(
        self,
        leg: int,
        members: list[str],
        watermark: int,
        status: str,
        suspects: list[str],
        leader: str | None = None,
    ) -> dict[str, Any]:
        """This replica's periodic report: its legislature and members, its watermark (the next
        decree to execute), the lease holder it believes in (None: none)."""
        return self._publish("qlog.heartbeat", leg=leg, members=members, watermark=watermark, leader=leader,
                             status=status, suspects=suspects)

    # -- the chain family (chain replication with epoch-stamped views; docs/families.md 4.2) -----
    def chain_view(
        self,
        from_epoch: int,
        epoch: int,
        chain: list[str],
        pos: int,
        outcome: str = "installed",
        reason: str | None = None,
    ) -> dict[str, Any]:
        """This replica installed (or refused, with ``reason``) the view ``(epoch, chain)``,
        head..tail, CASed from ``from_epoch``, its ViewChange entry at log position ``pos``.
        Sequence it under the store mutex (duty 1)."""
        return self._publish("chain.view", from_epoch=from_epoch, epoch=epoch, chain=chain, pos=pos,
                             outcome=outcome, reason=reason)

    def chain_wedge(self, epoch: int, reason: str, suspect: str | None = None) -> dict[str, Any]:
        """This replica recorded its view of ``epoch`` as wedged (``reason``: suspect_upstream,
        suspect_downstream or command; ``suspect``: the peer it suspects)."""
        return self._publish("chain.wedge", epoch=epoch, reason=reason, suspect=suspect)

    def chain_append(
        self,
        assumed: Mapping[str, int],
        epoch: int,
        pos: int,
        origin: str,
        outcome: str,
        count: int = 1,
        digest: str | None = None,
    ) -> dict[str, Any]:
        """This replica's store handled a run of ``count`` data entries of ``epoch`` at ``pos``
        .. ``pos + count - 1`` with one ``outcome``; ``assumed`` (``{epoch, pos}``) is the CAS
        precondition of the run's first append; ``digest`` with ``count`` 1 only. Every accepted
        append must be reported (in runs if need be) before the next heartbeat."""
        return self._publish("chain.append", assumed=assumed, epoch=epoch, pos=pos, count=count,
                             origin=origin, outcome=outcome, digest=digest)

    def chain_heartbeat(
        self,
        epoch: int,
        chain: list[str],
        wedged: bool,
        pos: int,
        ttl_ms: int,
        status: str,
        stable: int | None = None,
    ) -> dict[str, Any]:
        """After each renewal of this replica's view-manager lease (at least every second): its
        view, whether it is wedged, its last log position, the lease's TTL, the tail's
        acknowledged position where known."""
        return self._publish("chain.heartbeat", epoch=epoch, chain=chain, wedged=wedged, pos=pos,
                             stable=stable, ttl_ms=ttl_ms, status=status)

    def _publish(self, event_type: str, **fields: Any) -> dict[str, Any]:
        with self._lock:
            event: dict[str, Any] = {
                "v": 1,
                "type": event_type,
                "group": self.group,
                "node": self.node,
                "ts_ms": self._clock(),
                "seq": self._seq,
                "incarnation": self._incarnation,
            }
            event.update((k, _plain(v)) for k, v in fields.items() if v is not None)
            try:
                wire = encode_event(event)
            except (TypeError, ValueError) as exc:
                raise ValueError(f"{event_type} event is not JSON: {exc}") from None
            # Validate the exact bytes that will go out, with the monitor's own parser.
            verdict = decode_event(wire)
            if isinstance(verdict, Invalid):
                raise ValueError(f"invalid {event_type} event: {verdict.reason}")
            self.publisher.send_raw(
                self.publisher.topics.for_event_type(event_type),
                self.group.encode("utf-8"),
                wire,
            )
            self._seq += 1
            return event


def _check_envelope(group: str, node: str, incarnation: int) -> None:
    """Validate ids and incarnation with the contract's own models (no second regex)."""
    try:
        Execution.model_validate(
            {
                "v": 1,
                "type": "execution",
                "group": group,
                "node": node,
                "ts_ms": 0,
                "seq": 0,
                "incarnation": incarnation,
                "executed": 0,
            }
        )
    except ValidationError as exc:
        raise ValueError(reason_of(exc)) from None
