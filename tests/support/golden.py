"""What the golden alert files share: a short stable digest of a JSON value (evidence, states)."""

from __future__ import annotations

import hashlib
import json
from typing import Any


def digest(value: Any) -> str:
    return hashlib.blake2b(json.dumps(value, sort_keys=True, separators=(",", ":")).encode(),
                           digest_size=8).hexdigest()
