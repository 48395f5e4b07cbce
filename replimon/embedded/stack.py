"""The embedded default stack: one broker with the pipeline's topics plus one PostgreSQL."""

from __future__ import annotations

import signal
import threading
from collections.abc import Mapping, Sequence
from types import FrameType, TracebackType
from typing import Any

from replimon.embedded.broker import EmbeddedBroker
from replimon.embedded.postgres import EmbeddedPostgres


class EmbeddedStack:
    """Context manager running `EmbeddedBroker` (with ``topics`` created) and `EmbeddedPostgres`.

    Guarantees: on leaving the block, normally or by any exception, both are stopped; a failed
    or interrupted start stops whatever was already running. Used from the main thread, SIGTERM
    is turned into ``SystemExit(143)`` while the block runs, so ``kill`` cleans up like Ctrl-C
    (KeyboardInterrupt) does; the previous handlers are restored on exit. The servers run in
    their own process groups, so the terminal's Ctrl-C reaches only this process, which then
    stops them in order.
    """

    def __init__(self, topics: Sequence[str], partitions: int, *,
                 topic_config: Mapping[str, str] | None = None) -> None:
        self.topics = list(topics)
        self.partitions = partitions
        self.topic_config = dict(topic_config or {})
        self.broker = EmbeddedBroker()
        self.postgres = EmbeddedPostgres()
        self._saved: dict[int, Any] = {}

    @property
    def bootstrap_servers(self) -> str:
        return self.broker.bootstrap_servers

    @property
    def dsn(self) -> str:
        return self.postgres.dsn

    def __enter__(self) -> EmbeddedStack:
        self._install_handlers()
        try:
            self.broker.start()
            if self.topics:
                self.broker.create_topics(self.topics, self.partitions, self.topic_config)
            self.postgres.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def stop(self) -> None:
        """Stop both servers (idempotent) and restore the previous signal handlers."""
        # A second Ctrl-C interrupting this is covered by the servers' own atexit hooks.
        try:
            try:
                self.postgres.stop()
            finally:
                self.broker.stop()
        finally:
            for signum, handler in self._saved.items():
                signal.signal(signum, handler if handler is not None else signal.SIG_DFL)
            self._saved.clear()

    def _install_handlers(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return  # signal handlers can only be set from the main thread
        self._saved[signal.SIGTERM] = signal.signal(signal.SIGTERM, _raise_system_exit)
        # Ctrl-C already raises KeyboardInterrupt unless someone replaced the default handler.
        self._saved[signal.SIGINT] = signal.signal(signal.SIGINT, signal.default_int_handler)


def _raise_system_exit(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)
