"""The rules of one group's monitor (docs/rules.md), as components over one shared ``Context``.

Shared by every protocol family:

* ``base``      the context: the group's clock and watermark, its nodes, alert emission
* ``admission`` each node's events in order; duplicates, holds, EVENTS_LOST, INCOMPLETE_HISTORY,
                EXECUTION_REGRESSION
* ``liveness``  NODE_SILENT, GROUP_SILENT, QUORUM_*, EXECUTOR_LAG, NO_PROGRESS

* ``family``    ``FamilyRules``, the one interface the group monitor drives a protocol family's
                rules through, and ``family_of`` (an event type's family)

Per protocol family, behind that interface:

* ``xcom``      XCom's configuration map and the rules judged against it, its frontiers,
                HORIZON_WEDGE and PENDING_CONFIG_STUCK
"""
