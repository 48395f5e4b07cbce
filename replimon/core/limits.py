"""Thresholds of the monitor's rules, in milliseconds and instances (pure; built from Settings)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from replimon.core.configmap import Rules


@dataclass(frozen=True, slots=True)
class Limits:
    """Every configurable number the rules use (docs/rules.md, "Thresholds": names and defaults)."""

    rules: Rules = field(default_factory=Rules)
    horizon_wedge_ms: int = 10_000
    no_progress_ms: int = 30_000
    pending_config_stuck_ms: int = 60_000
    node_silent_ms: int = 5_000
    executor_lag_instances: int = 1000
    executor_lag_ms: int = 10_000
    group_silent_ms: int = 15_000
    skew_ms: int = 2_000  # cross-node event-time disorder tolerated without false alerts
    clock_skew_ms: int = 300_000  # a clock further ahead than this is CLOCK_SKEW (core/clocks.py)
    gen_no_online_ms: int = 15_000  # generations' wedges (docs/rules.md, "Generations")
    gen_recovery_stuck_ms: int = 60_000
    gen_vote_stuck_ms: int = 30_000
    qlog_no_leader_ms: int = 15_000  # quorum-log wedges (docs/rules.md, "The quorum-log family")
    qlog_recover_stuck_ms: int = 60_000
    chain_wedge_ms: int = 10_000  # chain wedges (docs/rules.md, "The chain family")
    chain_view_stale_ms: int = 10_000

    @classmethod
    def from_settings(cls, settings: Any) -> Limits:
        """From ``replimon.config.Settings`` (duck-typed: the core imports no config machinery)."""
        th = settings.thresholds
        rules = Rules.from_thresholds(th)

        def ms(seconds: float) -> int:
            return int(round(seconds * 1000))

        return cls(
            rules=rules,
            horizon_wedge_ms=ms(th.horizon_wedge_s),
            no_progress_ms=ms(th.no_progress_s),
            pending_config_stuck_ms=ms(th.pending_config_stuck_s),
            node_silent_ms=ms(th.node_silent_s),
            executor_lag_instances=th.executor_lag_instances,
            executor_lag_ms=ms(th.executor_lag_s),
            group_silent_ms=ms(th.group_silent_s),
            skew_ms=ms(th.skew_s),
            clock_skew_ms=ms(th.clock_skew_s),
            gen_no_online_ms=ms(th.gen_no_online_s),
            gen_recovery_stuck_ms=ms(th.gen_recovery_stuck_s),
            gen_vote_stuck_ms=ms(th.gen_vote_stuck_s),
            qlog_no_leader_ms=ms(th.qlog_no_leader_s),
            qlog_recover_stuck_ms=ms(th.qlog_recover_stuck_s),
            chain_wedge_ms=ms(th.chain_wedge_s),
            chain_view_stale_ms=ms(th.chain_view_stale_s),
        )
