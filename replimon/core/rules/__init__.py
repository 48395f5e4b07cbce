"""The monitor's rule families (SPEC section 5), one module each, over a shared ``GroupState``.

* ``data``      ordering per node, duplicates, EVENTS_LOST, INCOMPLETE_HISTORY, EXECUTION_REGRESSION
* ``config``    the configuration map rebuilt from decided commands; config reports and heartbeat
                views checked against it (EH_*, OLD_MEMBER_*, CONFIG_*, CACHE_INVARIANT, info kinds)
* ``decisions`` DIVERGENT_DECISION, BEYOND_HORIZON, CAN_LEAVE_UNSAFE
* ``liveness``  wedges and liveness, evaluated on the group's event-time clock
"""
