"""How the job reports an outage (`OutageNotice`: one line when a server is lost, one a minute
while it stays lost, one when it is back with how long it was away), and a read that stalls
because no broker answers, told apart from a read whose records do not
come, with one line when the broker is lost and one when it is back (docs/operations.md,
"Broker outage").

`read_ranges` asks a `BrokerWatch` after ``probe_s`` without a record: the watch asks the
consumer for metadata; no answer (connection refused, timed out) is an outage, whose time does
not count against the read's ``timeout_s``; an answer is a broker that is there, so the read's
own timeout goes on counting. librdkafka reconnects by itself, so the read goes on where it
stood when the broker is back. ``bound_s`` (None: no bound) ends an outage that lasts too long
with `BrokerUnreachable`.

One line per outage, not one per read: the reads of a micro-batch run in several tasks (Python
worker processes) at once, each with its own watch. The first to find the broker lost creates a
notice file (``<tmp>/replimon-kafka-lost-<hash of the servers>``) and says so; the others see it
and stay quiet (INFO); every watch still waiting touches it at each probe, so the file of a
process killed meanwhile goes stale after ``STALE_S`` and the next outage is said again. The one
that removes the file when the broker is back says that.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from replimon.kafka.consumers import unreachable

log = logging.getLogger("replimon.kafka")

STILL_EVERY_S = 60.0  # while a server stays lost, a "still" line this often
PROBE_S = 5.0  # without a record this long, ask whether any broker answers
PROBE_TIMEOUT_S = 5.0  # how long that question waits for an answer
STALE_S = 60.0  # a notice file nobody touched for this long was left by a process that died


class OutageNotice:
    """The lines of one outage: ``lost`` when the first call fails, ``still`` every ``every_s``
    while calls keep failing, ``back`` (with the outage's real duration) when one succeeds
    (docs/operations.md: the broker, under planning and under the Kafka sink; PostgreSQL, under
    its sink). The texts are format strings: ``{reason}`` (the first line of the last error),
    ``{down}`` (seconds so far, rounded) and whatever the caller passes as ``fields``.
    Nothing is logged while nothing fails."""

    def __init__(self, logger: logging.Logger, lost: str, still: str, back: str, *,
                 every_s: float = STILL_EVERY_S, clock: Any = time.monotonic) -> None:
        self.log, self.lost_text, self.still_text, self.back_text = logger, lost, still, back
        self.every_s = every_s
        self.clock = clock
        self.since: float | None = None  # when the outage began (clock); None: no outage
        self._said = 0.0

    @property
    def down(self) -> bool:
        return self.since is not None

    def seconds(self) -> float:
        return 0.0 if self.since is None else self.clock() - self.since

    def failed(self, exc: BaseException | str, *, began: float | None = None, **fields: Any) -> None:
        """A call failed for the outage: the first line, or a "still" line once a minute.
        ``began``: when the failed call started (clock), where the outage is counted from."""
        now = self.clock()
        reason = exc if isinstance(exc, str) else short(exc)
        if self.since is None:
            self.since = now if began is None else min(began, now)
            self._said = now
            self.log.warning(self.lost_text.format(reason=reason, down=0, **fields))
        elif now - self._said >= self.every_s:
            self._said = now
            self.log.warning(self.still_text.format(reason=reason, down=round(now - self.since), **fields))

    def ok(self, **fields: Any) -> float | None:
        """A call succeeded: the "back" line if there was an outage; its duration (None: none)."""
        if self.since is None:
            return None
        took = self.clock() - self.since
        self.since = None
        self.log.warning(self.back_text.format(down=round(took), **fields))
        return took


class BrokerUnreachable(TimeoutError):
    """No broker answered for longer than a watch's bound."""


def short(exc: BaseException) -> str:
    """An error's first line, short; librdkafka's own text for a KafkaException."""
    err: Any = exc.args[0] if exc.args else None
    text = (err.str() if hasattr(err, "str") else str(exc)).strip()
    return (text.splitlines()[0] if text else type(exc).__name__)[:160]


class BrokerWatch:
    """Watches one read's consumer while it stalls (module docstring). ``servers``: the
    bootstrap servers (named in the lines, and what the notice is shared by); ``what``: the
    reader, as the lines name it ("... waits for it", "... goes on")."""

    def __init__(self, servers: str, *, what: str = "the read", probe_s: float = PROBE_S,
                 bound_s: float | None = None, notice_dir: str | Path | None = None) -> None:
        self.servers = servers
        self.what = what
        self.probe_s = probe_s
        self.bound_s = bound_s
        digest = hashlib.sha1(servers.encode()).hexdigest()[:12]
        self.notice = Path(notice_dir or tempfile.gettempdir()) / f"replimon-kafka-lost-{digest}"
        self.since: float | None = None  # when this watch found the broker lost
        self._claimed = False  # this watch said the outage (and says "still" once a minute)
        self._said = 0.0

    def stalled(self, consumer: Any, quiet_since: float | None = None) -> bool:
        """After ``probe_s`` without a record: True when no broker answers (an outage: the read
        waits on), False when one does. ``quiet_since``: when the read last made progress
        (time.monotonic; the outage is counted from there). Raises `BrokerUnreachable` past
        ``bound_s`` and any error of the metadata call that is not a broker out of reach."""
        try:
            consumer.list_topics(timeout=PROBE_TIMEOUT_S)
        except Exception as exc:
            if not unreachable(exc):
                raise
            self._lost(exc, quiet_since)
            return True
        self.back()
        return False

    def _lost(self, exc: BaseException, quiet_since: float | None) -> None:
        now = time.monotonic()
        if self.since is None:
            self.since = now if quiet_since is None else min(quiet_since, now)
            self._said = now
            self._claimed = self._claim()
            if self._claimed:
                log.warning("Kafka: no broker of %s answers (%s); %s waits for it", self.servers,
                            short(exc), self.what)
            else:
                log.info("Kafka: no broker of %s answers; %s waits for it (said already)",
                         self.servers, self.what)
        else:
            with contextlib.suppress(OSError):
                os.utime(self.notice)
            if self._claimed and now - self._said >= STILL_EVERY_S:
                self._said = now
                log.warning("Kafka: still no broker of %s answers after %.0f s (%s); %s waits for it",
                            self.servers, now - self.since, short(exc), self.what)
        if self.bound_s is not None and now - self.since > self.bound_s:
            raise BrokerUnreachable(f"no broker of {self.servers} answered for "
                                    f"{now - self.since:.0f} s; {self.what} gives up")

    def _claim(self) -> bool:
        """Whether this watch is the first to say the broker is lost (creates the notice)."""
        try:
            if time.time() - self.notice.stat().st_mtime > STALE_S:
                self.notice.unlink()
        except FileNotFoundError:
            pass
        except OSError:
            return True  # no notice to share: better a line twice than none
        try:
            fd = os.open(self.notice, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            return False
        except OSError:
            return True
        os.close(fd)
        return True

    def back(self) -> None:
        """The read made progress or a broker answered: say so once, if it was lost."""
        if self.since is None:
            return
        took = time.monotonic() - self.since
        self.since = None
        try:
            self.notice.unlink()
        except FileNotFoundError:
            log.info("Kafka: the broker at %s answers again (said already)", self.servers)
            return
        except OSError:
            pass
        log.warning("Kafka: the broker at %s answers again after %.0f s; %s goes on", self.servers,
                    took, self.what)
