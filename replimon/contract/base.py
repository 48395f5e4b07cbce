"""The building blocks every contract-v1 model shares (docs/contract.md, "Decisions taken where
the tables are silent"): strict, frozen models with no unknown fields and no nulls, the id
charset, non-negative 64-bit integers. Each family's models (``models.py`` for XCom,
``models_gen.py`` for generations) build on these, so every family's events obey the same rules.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

INT64_MAX = 2**63 - 1

Id = Annotated[str, Field(pattern=r"^[A-Za-z0-9._:-]{1,128}$")]
NonNeg = Annotated[int, Field(ge=0, le=INT64_MAX)]
Positive = Annotated[int, Field(ge=1, le=INT64_MAX)]


class _Strict(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)

    @model_validator(mode="before")
    @classmethod
    def _no_nulls(cls, data: Any) -> Any:
        # An optional field is left out, never null: the JSON Schema says the same.
        if isinstance(data, dict):
            for key, value in data.items():
                if value is None:
                    raise ValueError(f"{key}: null is not allowed (leave the field out)")
        return data


class _Envelope(_Strict):
    # An int pinned to 1 rather than Literal[1]: Literal compares with ==, so true and 1.0 pass.
    v: Annotated[int, Field(ge=1, le=1, json_schema_extra={"const": 1})]
    group: Id
    node: Id
    ts_ms: NonNeg
    seq: NonNeg
    incarnation: NonNeg
