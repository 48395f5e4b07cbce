"""The generations family (Postgres multimaster, ``gen.*`` events; docs/families.md section 2).

* ``family``  ``GenRules``, the object the group monitor drives (``FamilyRules``): dispatch, the
              members and quorum set it supplies, its snapshot and saved state
* ``nodes``   what the rules remember of each node (``GenNode``) and of the group's generations
* ``safety``  the safety rules (violations), judged per node in seq order or as set facts
"""
