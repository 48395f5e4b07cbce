"""Everything that puts events on the replica topics: the publisher library (``Publisher``, the
transport; ``NodePublisher``, one node's events) and the simulator."""

from replimon.producers.node import NodePublisher
from replimon.producers.publisher import BufferFull, Publisher, PublishError

__all__ = ["BufferFull", "NodePublisher", "PublishError", "Publisher"]
