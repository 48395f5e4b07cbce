"""The quorum-log family (a Paxos replicated log with reconfiguration, ``qlog.*`` events;
docs/families.md section 3; halon's ``replicated-log``).

* ``family``  ``QlogRules``, the object the group monitor drives (``FamilyRules``): dispatch, the
              members, quorum set and frontiers it supplies, its snapshot and saved state
* ``nodes``   what the rules remember of each replica (``QlogNode``) and of the legislatures
* ``safety``  the safety rules (violations), judged per replica in seq order or as set facts
* ``quorum``  the two quorum rules of passed decrees, held until the legislature is known
* ``wedges``  QLOG_NO_LEADER and QLOG_RECOVER_STUCK
"""
