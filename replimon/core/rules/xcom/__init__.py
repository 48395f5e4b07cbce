"""XCom's rules (MySQL Group Replication): the configuration map and everything judged against it.

* ``family``    ``XComRules``, the one object the group monitor drives: XCom's frontiers, event
                dispatch, HORIZON_WEDGE, its part of an evaluation and of the snapshot
* ``config``    the map rebuilt from decided commands; config reports, heartbeat views and caches
                judged against it (EH_*, OLD_MEMBER_*, CONFIG_*, CACHE_INVARIANT, the info kinds),
                PENDING_CONFIG_STUCK
* ``decisions`` DIVERGENT_DECISION, BEYOND_HORIZON, CAN_LEAVE_UNSAFE
* ``records``   command records and config keys the rules compare
* ``state``     XCom's values in the saved state, as JSON values and back
"""
