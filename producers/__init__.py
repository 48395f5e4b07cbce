"""Everything that puts events on the replica topics: the publisher library and the simulator."""
