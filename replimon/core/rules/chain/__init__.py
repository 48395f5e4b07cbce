"""The chain-replication family (chain replication with epoch-stamped views, ``chain.*`` events;
docs/families.md section 4; cstorey's chain-replication-experiment).

* ``family``  ``ChainRules``, the object the group monitor drives (``FamilyRules``): dispatch, the
              members and frontiers it supplies, its snapshot and saved state
* ``nodes``   what the rules remember of each replica (``ChainNode``) and of each view (``View``)
* ``safety``  the safety rules (violations), judged per replica in seq order or as set facts
* ``wedges``  CHAIN_WEDGE_NOT_REPLACED, CHAIN_LEASE_EXPIRED and CHAIN_VIEW_STALE
"""
