"""Parse and validate Kafka records in Spark: contract-valid events, and dead letters with a reason.

``split_events(df)`` takes the Kafka source columns (key, value, topic, partition, offset,
timestamp) and returns ``(valid, dead)``. It is the Spark twin of
:func:`replimon.contract.parse_event`: the same verdict on every record, and the same one-line
reason wherever Spark can produce it (known differences below). Everything is Spark SQL
expressions on the JVM, no Python UDF; it works on batch and streaming DataFrames alike.
``check_events(df)`` is the single frame both sides are filtered from (``error`` NULL = valid):
in a ``foreachBatch``, persist it and write both sides from it so each record is parsed once.

How it works
------------
1. Guards, as parse_event: a null value, more than 1 MiB, invalid UTF-8 (``is_valid_utf8``; the
   offset of the first bad byte comes from ``make_valid_utf8``).
2. JSON: ``try_parse_json('[' || value || '\\n,0]')``. A VARIANT keeps the JSON type of every
   value (BIGINT, DECIMAL, DOUBLE, BOOLEAN, STRING, VOID = null, ARRAY, OBJECT), which strict typing
   needs. The wrapper catches trailing garbage, which ``parse_json`` (like ``from_json``) ignores:
   one JSON value and nothing else gives exactly two elements.
3. Typed columns: ``from_json(value, contract_schema())``, the schema derived from the pydantic
   models. It is exact once step 4 has seen the JSON types (from_json alone is not, see below).
4. Fast path, which can only say "valid": no ``null`` token in the text (explicit nulls are never
   allowed), ``schema_of_variant(doc)`` IN the set of shapes generated from the model (sorted
   keys and exact types: no unknown key at any level, required fields present, BIGINT where an
   integer is due -- ``"5"``, ``5.0``, ``true`` have other types), then the values on the typed
   struct (bounds, id/digest patterns, lengths, enums) and the cross-field rules. Every simulator
   event takes it (the tests check that, and that it never accepts what parse_event rejects).
5. Slow path, only for the other records: the checks that name the field, generated from the
   models too (field order, required/optional, ``ge``/``le``, ``pattern``, lengths, ``Literal``
   values, nested models, lists), on ``map<string,variant>`` views of the objects, with the same
   hand-written cross-field rules (one accessor-based function per pydantic ``model_validator``;
   import fails if a model gains a validator without one). Errors are collected in pydantic's
   order -- a null anywhere in an object is that object's only error, then fields in declaration
   order with nested errors in place, then unknown keys in input order (``json_object_keys`` on
   the text; a variant sorts keys), a model's own rule only when its fields are clean -- so the
   first error and the ``(+N more)`` count match. The offending value is rendered as Python's
   ``repr`` in SQL (quotes and escapes of ``str.__repr__``, ``repr(float)`` from the digits,
   integers beyond int64 read back from the text with ``get_json_object``) once, for the first
   error only. Patterns get ``\\z`` for ``$`` (Java's ``$`` matches before a final newline,
   pydantic's Rust regex does not); nesting deeper than pydantic's parser allows (201) is "not JSON"
   as there.
6. The topic must carry the record's type (``topic_types``, ``{topic: type}``); a mismatch, or a
   topic outside the mapping, is a dead letter. The contract's reason comes first.
7. The dead letter reason is one line (``\\n``/``\\r`` escaped).

Cost
----
Measured on these 2-core machines (local[2], shared with other jobs, so +-30 %): steady state
about 100k records/s; each query (each micro-batch) also pays about 1-1.5 s of planning for the
large expression trees, so one run over 200k records comes to 35-60k records/s. parse_event on one
core does 170-260k records/s: Spark's JSON to VARIANT parse, schema_of_variant and from_json each
cost about as much as pydantic's whole validation. The first query in a JVM also compiles the
generated code (5-10 s), and building the plan takes 3-5 s (cached per application after that).

Whole-stage codegen would fuse all these Projects into one Java method far beyond the 8000 bytes
HotSpot JIT-compiles (``spark.sql.codegen.hugeMethodLimit`` defaults to 65535), and that method
then runs interpreted, 2-4x slower. A NULL column of a 128-field struct type (``_wide_null``) is
carried through the checks: operators with more than ``spark.sql.codegen.maxFields`` (100) fields
are left out of whole-stage codegen and evaluated by UnsafeProjections, which split the code into
small methods. Setting ``spark.sql.codegen.hugeMethodLimit=8000`` on the session (as Spark's docs
advise for HotSpot) has a similar effect.

What from_json does on Spark 4.3.0 (why it checks nothing here)
--------------------------------------------------------------
Checked with ``from_json(s, 'x bigint')`` (PERMISSIVE, the default) and friends:

* ``"5"``, ``5.0``, ``1e2``, ``true``, ``[1]`` and 2**63 into BIGINT all become NULL, silently: the
  same NULL as an absent key, so neither the field nor the cause can be told. FAILFAST raises
  CANNOT_PARSE_JSON_FIELD and kills the query instead.
* Into DECIMAL(38,0) it coerces: ``"5"`` -> 5 and ``1.5`` -> 2 (rounded).
* Into STRING every scalar is accepted: ``5`` and ``"5"`` both give ``'5'``, ``true`` gives
  ``'true'``, ``1e2`` gives ``'100.0'``, ``0.0001`` gives ``'1.0E-4'`` (Jackson re-prints doubles),
  ``NaN`` gives ``'"NaN"'``; an object or array comes back as its JSON text. ``map<string,string>``
  therefore cannot tell ``"5"`` from ``5`` either.
* Lenient parser by default: single quotes, ``NaN``/``Infinity``, trailing garbage (``{"x":5}}``
  and ``{"x":5} {"x":6}`` parse as ``{"x":5}``), duplicate keys (last wins), and a lone surrogate
  escape ``"\\ud800"`` becomes ``'?'``. Leading zeros and raw control characters are refused.
* ``schema_of_json`` only takes a constant (foldable) argument: no per-row use.
* ``get_json_object`` re-prints numbers (``1.0E-4``) and strips string quotes: no raw token either
  (but a BigInteger token comes back digit for digit, which the slow path uses).

``parse_json``/``try_parse_json`` (VARIANT) is strict where it matters: no single quotes, no
NaN/Infinity, no leading zeros, no lone surrogates, no BOM, raw control characters refused,
duplicate keys refused unless ``spark.sql.variant.allowDuplicateKeys``. Its own surprises:

* trailing garbage is ignored (hence the wrapper array);
* ``5.0`` is stored as DECIMAL(1,0) and ``-0.0`` as 0 (scale and sign of zero lost); integers
  beyond int64 as DECIMAL(p,0), like integral floats beyond it; numbers with more than 38 digits
  and every exponent form (``1e2``) as DOUBLE, ``1e400`` as DOUBLE Infinity;
* nesting deeper than 1000 and numbers longer than 1000 characters are refused (Jackson's
  StreamReadConstraints); keys come back sorted (``map_keys``, ``schema_of_variant``);
* ``schema_of_variant`` merges the items of an array: ``[{"id":"a"},{"id":"b","protocol":1}]``
  is ``ARRAY<OBJECT<id: STRING, protocol: BIGINT>>`` and a null item disappears in the merge
  (``["a",null]`` is ``ARRAY<STRING>``); hence the text check for ``null``;
* ``spark.sql.variant.allowDuplicateKeys`` is read when the plan is analysed, not when it runs
  (also per micro-batch): ``check_events`` sets it while it builds the plan and restores it;
* ``variant_get``/``try_variant_get`` to any type but VARIANT builds a Cast expression per row
  (slow); ``try_variant_get`` of a failing cast throws and catches internally (slower);
* ANSI mode (Spark 4 default): ``arr[i]`` out of range and ``variant_get`` of a wrong type raise;
  the code uses ``get`` and ``try_variant_get``.

Known differences from parse_event
----------------------------------
Verdicts agree on every record of the parity test (tests/streaming/test_validate.py: the contract corpus,
edge cases, simulator events and seeded mutations). Reasons differ only here:

======================================  ========================================  ========================
record                                  parse_event                               split_events
======================================  ========================================  ========================
malformed JSON                          ``not JSON: Expecting ',' delimiter at    ``not JSON`` (Spark's
                                        line 1 column 29`` (Python's json)        parser gives no place)
NaN / Infinity tokens                   jiter reads them, then the field (or      ``not JSON``
                                        type) is wrong: ``seq: ... (got inf)``
a number of 1001..4300 digits           the field's reason with the number        ``not JSON`` (Jackson)
``type`` given as a list or object      Python's repr of it                       approximate repr (JSON
                                                                                  text, Python spellings,
                                                                                  keys sorted)
a character new in Unicode 14 in a      printed as is                             escaped (Java 17 knows
shown string                                                                      Unicode 13)
a float shown with 16-17 digits         shortest repr                             Java 17 Double.toString
                                                                                  digits (rarely longer)
a key with a newline or CR (unknown     the raw newline: a two-line reason        ``\\n``: one line
field)
duplicate keys,                         last value wins                           ``not JSON``
``allow_duplicate_keys=False``
======================================  ========================================  ========================
"""

from __future__ import annotations

import types
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from replimon.config import Topics
from replimon.contract.models import (
    EVENT_TYPES,
    INT64_MAX,
    ConfigCommand,
    ConfigReport,
    Decision,
    Execution,
    Heartbeat,
    View,
)

__all__ = [
    "DEAD_COLUMNS",
    "DEFAULT_TOPIC_TYPES",
    "KAFKA_COLUMNS",
    "MAX_BYTES",
    "check_events",
    "contract_schema",
    "split_events",
]

MAX_BYTES = 1 << 20
INT64_MIN = -(2**63)
MAX_DEPTH = 201  # pydantic's JSON parser (jiter) refuses values nested deeper (a scalar counts 1)
KAFKA_COLUMNS = ("key", "value", "topic", "partition", "offset", "timestamp")
DEAD_COLUMNS = ("key", "value", "topic", "partition", "offset", "timestamp", "reason")
DEFAULT_TOPIC_TYPES: Mapping[str, str] = {Topics().for_event_type(t): t for t in EVENT_TYPES}
MODELS: dict[str, type[BaseModel]] = {
    "decision": Decision,
    "execution": Execution,
    "heartbeat": Heartbeat,
    "config": ConfigReport,
}
_DUP_KEYS_CONF = "spark.sql.variant.allowDuplicateKeys"


# ------------------------------------------------------------------ the contract, read from pydantic
@dataclass(frozen=True)
class _Int:
    ge: int
    le: int


@dataclass(frozen=True)
class _Str:
    pattern: str | None = None
    min_len: int | None = None
    max_len: int | None = None


@dataclass(frozen=True)
class _Lit:
    values: tuple[str, ...]


@dataclass(frozen=True)
class _List:
    item: Any  # a spec
    min_len: int | None = None


@dataclass(frozen=True)
class _Model:
    model: type[BaseModel]


@dataclass(frozen=True)
class _Field:
    name: str
    spec: Any
    required: bool


_CONSTRAINTS = ("ge", "le", "min_length", "max_length", "pattern")


def _constraints(metadata: list[Any]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for item in metadata:
        names = [a for a in _CONSTRAINTS if getattr(item, a, None) is not None]
        if not names:
            raise TypeError(f"contract constraint {item!r} has no Spark translation")
        for name in names:
            found[name] = getattr(item, name)
    return found


def _spec(annotation: Any, metadata: list[Any]) -> Any:
    origin = get_origin(annotation)
    if origin in (Union, types.UnionType):
        args = [a for a in get_args(annotation) if a is not type(None)]
        if len(args) != 1:
            raise TypeError(f"unsupported union {annotation!r}")
        return _spec(args[0], metadata)
    if origin is Annotated:
        base, *extra = get_args(annotation)
        meta = list(metadata)
        for item in extra:
            meta.extend(getattr(item, "metadata", [item]))
        return _spec(base, meta)
    c = _constraints(metadata)
    if origin is Literal:
        return _Lit(tuple(get_args(annotation)))
    if origin is list:
        (item,) = get_args(annotation)
        return _List(_spec(item, []), c.get("min_length"))
    if annotation is int:
        if "ge" not in c or "le" not in c:
            raise TypeError("every contract integer needs ge and le (it lands in a LongType)")
        return _Int(c["ge"], c["le"])
    if annotation is str:
        return _Str(c.get("pattern"), c.get("min_length"), c.get("max_length"))
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return _Model(annotation)
    raise TypeError(f"unsupported contract annotation {annotation!r}")


def _fields(model: type[BaseModel]) -> list[_Field]:
    return [
        _Field(name, _spec(info.annotation, list(info.metadata)), info.is_required())
        for name, info in model.model_fields.items()
    ]


def _spark_type(spec: Any) -> T.DataType:
    if isinstance(spec, _Int):
        return T.LongType()
    if isinstance(spec, _Str | _Lit):
        return T.StringType()
    if isinstance(spec, _List):
        return T.ArrayType(_spark_type(spec.item))
    return T.StructType([T.StructField(f.name, _spark_type(f.spec)) for f in _fields(spec.model)])


def contract_schema() -> T.StructType:
    """Every field of every event type, typed, in contract order (envelope first)."""
    fields: dict[str, T.DataType] = {}
    for model in MODELS.values():
        for f in _fields(model):
            dtype = _spark_type(f.spec)
            if fields.setdefault(f.name, dtype) != dtype:
                raise TypeError(f"field {f.name} has two types across event types")
    return T.StructType([T.StructField(name, dtype) for name, dtype in fields.items()])


# ------------------------------------------------------------------------------- column helpers
# An error is a struct: its text, the offending value (a variant) and how the value shows in the
# reason. The value is rendered (Python's repr, in SQL) once per record, for the first error only:
# rendering it in every check would make the plan too big to compile.
_ERR_TYPE = "struct<text:string,val:variant,mode:int,path:string>"
_ERRS_TYPE = f"array<{_ERR_TYPE}>"
_PLAIN, _SUFFIX, _INLINE = 0, 1, 2  # no value; " (got <repr>)" unless a list/object; at _MARK
_MARK = "\u0000"


def _s(text: str) -> Column:
    return F.lit(text)


def _get(arr: Column, index: int = 0) -> Column:
    return F.get(arr, index)  # NULL when out of range (arr[i] raises under ANSI)


def _let(value: Column, body: Callable[[Column], Column]) -> Column:
    """Bind ``value`` once (the lambda sees it) instead of repeating the expression."""
    return _get(F.transform(F.array(value), body))


def _err(text: Column | str, val: Column | None = None, mode: int = _PLAIN, path: Column | None = None) -> Column:
    """An error; ``path`` (JSONPath of ``val``) lets the renderer read the number as written."""
    return F.struct(
        (_s(text) if isinstance(text, str) else text).alias("text"),
        (F.lit(None).cast("variant") if val is None else val).alias("val"),
        F.lit(mode).alias("mode"),
        (F.lit(None).cast("string") if path is None else path).alias("path"),
    )


def _errs(*errs: Column) -> Column:
    """The non-null errors, as an array."""
    return F.array_compact(F.array(*errs)) if errs else _none()


def _none() -> Column:
    return F.array().cast(_ERRS_TYPE)


def _str(x: Column) -> Column:
    return F.try_variant_get(x, "$", "string")


def _long(x: Column) -> Column:
    return F.try_variant_get(x, "$", "bigint")


def _vtype(x: Column) -> Column:
    return F.schema_of_variant(x)


@dataclass(frozen=True)
class _Where:
    """Where a value sits: ``loc`` for reasons (``view.members.0``), ``jpath`` for its raw text."""

    loc: Column | None  # None: the top level
    jpath: Column

    def field(self, name: str) -> _Where:
        loc = _s(name) if self.loc is None else F.concat(self.loc, _s("." + name))
        return _Where(loc, F.concat(self.jpath, _s("." + name)))

    def item(self, index: Column) -> _Where:
        assert self.loc is not None
        return _Where(
            F.concat(self.loc, _s("."), index.cast("string")),
            F.concat(self.jpath, _s("["), index.cast("string"), _s("]")),
        )

    def say(self, msg: Column | str) -> Column:
        """``loc: msg`` (or ``msg`` at the top level, as parse_event words model-level rules)."""
        text = _s(msg) if isinstance(msg, str) else msg
        return text if self.loc is None else F.concat(self.loc, _s(": "), text)

    def key(self, key: Column, msg: str) -> Column:
        """``loc.key: msg`` for a key found in the data."""
        prefix = _s("") if self.loc is None else F.concat(self.loc, _s("."))
        return F.concat(prefix, key, _s(msg))


# ---------------------------------------------------------------------- Python's repr, in SQL


def _char_repr(c: Column, quote: Column) -> Column:
    cp = F.ascii(c)  # the code point of the first character
    hexed = F.lower(F.hex(cp))
    esc = F.when(cp < 0x100, F.concat(_s("\\x"), F.lpad(hexed, 2, "0")))
    esc = esc.when(cp < 0x10000, F.concat(_s("\\u"), F.lpad(hexed, 4, "0")))
    esc = esc.otherwise(F.concat(_s("\\U"), F.lpad(hexed, 8, "0")))
    return (
        F.when(c == "\\", _s("\\\\"))
        .when(c == quote, F.concat(_s("\\"), quote))
        .when(c == "\n", _s("\\n"))
        .when(c == "\r", _s("\\r"))
        .when(c == "\t", _s("\\t"))
        # str.isprintable(): Other (Cc Cf Cs Co Cn) and Separator (Zl Zp Zs) are escaped, but ' '
        .when((c != " ") & c.rlike(r"[\p{C}\p{Z}]"), esc)
        .otherwise(c)
    )


def _str_repr(s: Column) -> Column:
    """``repr(s)`` of a Python str."""
    quote = F.when((F.instr(s, "'") > 0) & (F.instr(s, '"') == 0), _s('"')).otherwise(_s("'"))
    slow = F.concat(
        quote, F.array_join(F.transform(F.split(s, ""), lambda c: _char_repr(c, quote)), ""), quote
    )
    return F.when(s.rlike(r"^[ -&(-\[\]-~]*\z"), F.concat(_s("'"), s, _s("'"))).otherwise(slow)


def _float_repr_from_text(text: Column) -> Column:
    """``repr(float)`` from a decimal or Java double text (``-12.50``, ``1.0E-5``, ``Infinity``)."""
    number = r"^(-?)([0-9]*)\.?([0-9]*)(?:[eE]([-+]?[0-9]+))?$"

    def fmt(q: Column) -> Column:  # q: sign, d (significant digits), e (scientific exponent)
        d, e, nd = q["d"], q["e"], F.length(q["d"])
        fixed = (
            F.when(e >= nd - 1, F.concat(d, F.repeat(_s("0"), e - nd + 1), _s(".0")))
            .when(e >= 0, F.concat(d.substr(F.lit(1), e + 1), _s("."), d.substr(e + 2, F.lit(1 << 20))))
            .otherwise(F.concat(_s("0."), F.repeat(_s("0"), -e - 1), d))
        )
        sci = F.concat(
            d.substr(F.lit(1), F.lit(1)),
            F.when(nd > 1, F.concat(_s("."), d.substr(F.lit(2), F.lit(1 << 20)))).otherwise(_s("")),
            F.when(e < 0, _s("e-")).otherwise(_s("e+")),
            F.lpad(F.abs(e).cast("string"), 2, "0"),
        )
        # Python's repr switches to scientific notation below 1e-4 and from 1e16 on
        return F.concat(q["sign"], F.when(d == "", _s("0.0")).when((e >= -4) & (e < 16), fixed).otherwise(sci))

    def digits(t: Column) -> Column:
        ipart, fpart = F.regexp_extract(t, number, 2), F.regexp_extract(t, number, 3)
        exp_text = F.regexp_extract(t, number, 4)
        exp10 = F.when(exp_text == "", F.lit(0)).otherwise(exp_text.try_cast("int"))
        every = F.concat(ipart, fpart)
        core = F.regexp_replace(every, "^0+", "")
        return F.struct(
            F.regexp_extract(t, number, 1).alias("sign"),
            F.regexp_replace(core, "0+$", "").alias("d"),
            (F.length(ipart) - 1 - (F.length(every) - F.length(core)) + exp10).alias("e"),
        )

    return _let(text, lambda t: F.when(t == "Infinity", _s("inf")).when(t == "-Infinity", _s("-inf"))
                .when(t == "NaN", _s("nan")).otherwise(_let(digits(t), fmt)))


def _float_repr(x: Column) -> Column:
    """``repr(float(json_number))`` for a DECIMAL or DOUBLE variant."""
    def pick(text: Column) -> Column:
        sig = F.length(F.regexp_replace(F.regexp_replace(text, r"[eE].*$|[-.]", ""), "^0+|0+$", ""))
        # up to 15 significant digits the decimal text is the shortest repr; beyond, round to a double
        return F.when(sig <= 15, text).otherwise(F.try_variant_get(x, "$", "double").cast("string"))

    return _float_repr_from_text(_let(_str(x), pick))  # decimals print plainly, doubles the Java way


def _container_repr(x: Column) -> Column:
    """An approximation of ``repr(list | dict)`` (keys sorted: a variant does not keep their order)."""
    j = F.to_json(x)
    for pattern, repl in ((r'"', "'"), (r",", ", "), (r":", ": "), (r"\btrue\b", "True"),
                          (r"\bfalse\b", "False"), (r"\bnull\b", "None")):
        j = F.regexp_replace(j, pattern, repl)
    return j


def _integer_token(raw: Column, path: Column) -> Column:
    """The number at ``path`` as written, when it is an integer (``get_json_object`` prints a
    BigInteger token digit for digit); NULL otherwise."""
    token = F.call_function("get_json_object", raw, path)
    return F.when(token.rlike(r"^-?[0-9]+$"), token)


def _is_big_integral(x: Column, t: Column, raw: Column, path: Column) -> Column:
    """An integer literal too big for a long. The variant keeps it as DECIMAL(p,0) (up to 38
    digits) or DOUBLE (beyond), as it keeps ``1e19`` or ``9223372036854775808.0``: only the text
    tells Python's int from its float."""
    dec = F.try_variant_get(x, "$", "decimal(38,0)")
    big_decimal = t.rlike(r"^DECIMAL\(\d+,0\)$") & ((dec > INT64_MAX) | (dec < INT64_MIN))
    return (big_decimal | (t == "DOUBLE")) & _integer_token(raw, path).isNotNull()


def _repr(x: Column, raw: Column, path: Column) -> Column:
    """``repr()`` of the JSON value as Python holds it after ``json.loads``."""
    t = _vtype(x)
    return (
        F.when(t == "STRING", _str_repr(_str(x)))
        .when(t == "BIGINT", _long(x).cast("string"))
        .when(t == "BOOLEAN", F.when(F.try_variant_get(x, "$", "boolean"), _s("True")).otherwise(_s("False")))
        .when(t == "VOID", _s("None"))
        .when(path.isNotNull() & _is_big_integral(x, t, raw, path), _integer_token(raw, path))
        # the variant keeps -0.0 as 0: the text still has the sign
        .when(path.isNotNull() & (F.try_variant_get(x, "$", "double") == 0)
              & F.call_function("get_json_object", raw, path).startswith("-"), _s("-0.0"))
        .when(t.startswith("DECIMAL") | (t == "DOUBLE") | (t == "FLOAT"), _float_repr(x))
        .otherwise(_container_repr(x))
    )


def _render(err: Column, shown: Column) -> Column:
    """The text of an error with its value (``shown``: its repr) the way parse_event shows it."""
    val = err["val"]
    t = _vtype(val)
    suffix = F.when(t.startswith("ARRAY") | t.startswith("OBJECT"), _s("")).otherwise(
        F.concat(_s(" (got "), shown, _s(")"))
    )
    return (
        F.when(err["mode"] == _SUFFIX, F.concat(err["text"], suffix))
        .when(err["mode"] == _INLINE, F.replace(err["text"], _s(_MARK), shown))
        .otherwise(err["text"])
    )


# ------------------------------------------------------------------------------ the field checks
def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def _java_pattern(pattern: str) -> str:
    # pydantic uses Rust's regex, where `$` is the end of the text; Java's `$` also matches before
    # a final newline ("g1\n" would pass). \z is the end of the text in Java.
    if pattern.endswith("$") and not pattern.endswith("\\$"):
        return pattern[:-1] + r"\z"
    return pattern


def _literal_expected(values: tuple[str, ...]) -> str:
    shown = [repr(v) for v in values]
    return shown[0] if len(shown) == 1 else ", ".join(shown[:-1]) + " or " + shown[-1]


def _int_error(spec: _Int, x: Column, where: _Where, version: bool, raw: Column) -> Column:
    def bound(limit: str) -> Column:
        if version:
            text = f"unsupported contract version (got {_MARK}, this monitor reads 1)"
        else:
            text = f"Input should be {limit} (got {_MARK})"
        return _err(where.say(text), x, _INLINE, where.jpath)

    t = _vtype(x)
    n = _long(x)
    ge, le = bound(f"greater than or equal to {spec.ge}"), bound(f"less than or equal to {spec.le}")
    in_range = F.when(n < spec.ge, ge)
    if spec.le < INT64_MAX:
        in_range = in_range.when(n > spec.le, le)
    negative = F.try_variant_get(x, "$", "double") < 0
    return (
        F.when(t == "BIGINT", in_range)
        .when(_is_big_integral(x, t, raw, where.jpath), F.when(negative, ge).otherwise(le))
        .otherwise(_err(where.say("Input should be a valid integer"), x, _SUFFIX, where.jpath))
    )


def _str_error(spec: _Str, x: Column, where: _Where) -> Column:
    s = _str(x)
    checks = F.when(_vtype(x) != "STRING", _err(where.say("Input should be a valid string"), x, _SUFFIX, where.jpath))
    if spec.min_len is not None:
        text = f"String should have at least {_plural(spec.min_len, 'character')}"
        checks = checks.when(F.length(s) < spec.min_len, _err(where.say(text), x, _SUFFIX, where.jpath))
    if spec.max_len is not None:
        text = f"String should have at most {_plural(spec.max_len, 'character')}"
        checks = checks.when(F.length(s) > spec.max_len, _err(where.say(text), x, _SUFFIX, where.jpath))
    if spec.pattern is not None:
        text = f"String should match pattern '{spec.pattern}'"
        checks = checks.when(~s.rlike(_java_pattern(spec.pattern)), _err(where.say(text), x, _SUFFIX, where.jpath))
    return checks


def _lit_error(spec: _Lit, x: Column, where: _Where) -> Column:
    ok = (_vtype(x) == "STRING") & _str(x).isin(*spec.values)
    text = f"Input should be {_literal_expected(spec.values)}"
    return F.when(~ok, _err(where.say(text), x, _SUFFIX, where.jpath))


def _value_errors(spec: Any, x: Column, where: _Where, raw: Column, version: bool = False) -> Column:
    """The errors of one present value, in pydantic's order."""
    if isinstance(spec, _Int):
        return _errs(_int_error(spec, x, where, version, raw))
    if isinstance(spec, _Str):
        return _errs(_str_error(spec, x, where))
    if isinstance(spec, _Lit):
        return _errs(_lit_error(spec, x, where))
    if isinstance(spec, _List):
        return _list_errors(spec, x, where, raw)
    return _model_errors(spec.model, x, where, raw)


def _list_errors(spec: _List, x: Column, where: _Where, raw: Column) -> Column:
    items = x.try_cast("array<variant>")
    each = F.flatten(
        F.transform(items, lambda it, i: _value_errors(spec.item, it, where.item(i), raw))
    )
    if spec.min_len:
        text = F.concat(
            _s(f"List should have at least {_plural(spec.min_len, 'item')} after validation, not "),
            F.size(items).cast("string"),
        )
        short = F.when(F.size(items) < spec.min_len, F.array(_err(where.say(text)))).otherwise(_none())
        each = F.concat(each, short)
    not_list = F.array(_err(where.say("Input should be a valid array"), x, _SUFFIX, where.jpath))
    return F.when(items.isNull(), not_list).otherwise(each)


def _in_input_order(candidates: Column, raw_keys: Callable[[], Column]) -> Column:
    """``candidates`` (keys, sorted as a variant keeps them) in the order the JSON text has them."""
    return F.when(F.size(candidates) <= 1, candidates).otherwise(
        F.filter(F.array_distinct(raw_keys()), lambda k: F.array_contains(candidates, k))
    )


def _model_errors(model: type[BaseModel], o: Column, where: _Where, raw: Column,
                  obj: Column | None = None, columns: Mapping[tuple[str, Any, bool], Column] | None = None) -> Column:
    """The errors of one object against ``model``, in pydantic's order.

    A null anywhere in the object is its only error (the models' ``_no_nulls`` runs first); then
    the fields in declaration order, then unknown keys in input order; the model's own rule only
    when all that is clean. ``obj``: the object already as a map (the top level).
    """
    if obj is None:  # bind the map once: repeating the cast in every check bloats the plan
        return _let(o.try_cast("map<string,variant>"), lambda om: _object_errors(model, o, om, where, raw))
    return _object_errors(model, o, obj, where, raw, columns)


def _field_key(f: _Field) -> tuple[str, Any, bool]:
    return (f.name, f.spec, f.required)


def _field_errors(f: _Field, om: Column, where: _Where, raw: Column) -> Column:
    """The errors of field ``f`` of the object ``om``: NULL when there are none to report."""
    value = om[f.name]
    at = where.field(f.name)
    missing = F.array(_err(at.say("missing"))) if f.required else F.lit(None).cast(_ERRS_TYPE)
    version = where.loc is None and f.name == "v"
    return F.when(value.isNull(), missing).otherwise(_value_errors(f.spec, value, at, raw, version))


def _object_errors(model: type[BaseModel], o: Column, om: Column, where: _Where, raw: Column,
                   columns: Mapping[tuple[str, Any, bool], Column] | None = None) -> Column:
    fields = _fields(model)

    def raw_keys() -> Column:
        if where.loc is None:
            return F.json_object_keys(raw)
        return F.json_object_keys(F.call_function("get_json_object", raw, where.jpath))

    keys = F.map_keys(om)
    nulls = F.filter(keys, lambda k: F.is_variant_null(om[k]))
    extras = _in_input_order(F.array_except(keys, F.array(*[_s(f.name) for f in fields])), raw_keys)
    if columns is None:
        per_field = [_field_errors(f, om, where, raw) for f in fields]
    else:  # the top level: each field checked once, in its own column, shared by the event types
        per_field = [columns[_field_key(f)] for f in fields if f.name != "type"]
    unknown = F.transform(extras, lambda k: _err(where.key(k, ": unknown field")))
    found = F.concat(F.flatten(F.array_compact(F.array(*per_field))), unknown)
    rules = _RULES.get(model)
    if rules is not None:
        found = _let(found, lambda fe: F.when(F.size(fe) > 0, fe).otherwise(
            F.filter(F.array(_err(where.say(rules(_Variants(om))))), lambda e: e["text"].isNotNull())
        ))
    null_error = where.key(_get(_in_input_order(nulls, raw_keys)), ": null is not allowed (leave the field out)")
    out = F.when(F.size(nulls) > 0, F.array(_err(null_error))).otherwise(found)
    if where.loc is not None:
        out = F.when(om.isNull(), F.array(_err(where.say("Input should be an object"), o, _SUFFIX, where.jpath))).otherwise(out)
    return out


# ---------------------------------------------------------- cross-field rules (model validators)
# Written once against an accessor, used on both paths: the slow path reads an object as
# map<string,variant> (_Variants), the fast path reads the typed struct (_Typed). The rules run
# only once the object's own fields are valid, so the reads below cannot fail.
class _Variants:
    def __init__(self, om: Column) -> None:
        self.om = om

    def has(self, key: str) -> Column:
        return self.om[key].isNotNull()

    def text(self, key: str) -> Column:
        return _str(self.om[key])

    def num(self, key: str) -> Column:
        return _long(self.om[key])

    def items(self, key: str) -> Column:
        return self.om[key].try_cast("array<variant>")

    def item_has(self, item: Column, key: str) -> Column:
        return F.try_variant_get(item, f"$.{key}", "variant").isNotNull()

    def item_str(self, item: Column, key: str) -> Column:
        return F.try_variant_get(item, f"$.{key}", "string")


class _Typed:
    def __init__(self, struct: Column) -> None:
        self.c = struct

    def has(self, key: str) -> Column:
        return self.c[key].isNotNull()

    def text(self, key: str) -> Column:
        return self.c[key]

    def num(self, key: str) -> Column:
        return self.c[key]

    def items(self, key: str) -> Column:
        return self.c[key]

    def item_has(self, item: Column, key: str) -> Column:
        return item[key].isNotNull()

    def item_str(self, item: Column, key: str) -> Column:
        return item[key]


_Obj = _Variants | _Typed


def _has_duplicates(o: _Obj, items: Column) -> Column:
    ids = F.transform(items, lambda n: o.item_str(n, "id"))
    return F.size(F.array_distinct(ids)) != F.size(ids)


def _decision_rules(o: _Obj) -> Column:
    kind, count = o.text("kind"), F.coalesce(o.num("count"), F.lit(1))
    is_config = kind == "config"
    return (
        F.when(is_config != o.has("config"), _s("config is required iff kind is 'config'"))
        .when(is_config & (count != 1), _s("a config decision has count 1"))
        .when(o.has("digest") & (count != 1), _s("digest is allowed only when count is 1"))
        .when(o.has("window_base") & (o.text("node") != o.text("proposer")),
              _s("window_base is allowed only when node == proposer"))
        # instance + count - 1 > INT64_MAX, without overflowing (ANSI would raise)
        .when(o.num("instance") - 1 > F.lit(INT64_MAX) - count, _s("instance + count - 1 overflows 64 bits"))
    )


def _config_command_rules(o: _Obj) -> Column:
    op, nodes, has_eh = o.text("op"), o.items("nodes"), o.has("event_horizon")
    set_eh = op == "set_event_horizon"
    no_protocol = F.exists(nodes, lambda n: ~o.item_has(n, "protocol"))
    return (
        F.when(set_eh & ~has_eh, _s("set_event_horizon needs event_horizon"))
        .when(set_eh & o.has("nodes"), _s("set_event_horizon takes no nodes"))
        .when(set_eh, F.lit(None).cast("string"))
        .when(F.coalesce(F.size(nodes), F.lit(0)) == 0, F.concat(op, _s(" needs a non-empty nodes list")))
        .when(_has_duplicates(o, nodes), _s("nodes lists a node twice"))
        .when(op.isin("add_nodes", "remove_nodes") & has_eh, F.concat(op, _s(" takes no event_horizon")))
        .when(op.isin("boot", "add_nodes") & no_protocol, F.concat(op, _s(" needs the protocol of every node")))
    )


def _view_rules(o: _Obj) -> Column:
    return F.when(_has_duplicates(o, o.items("members")), _s("members lists a node twice"))


def _config_report_rules(o: _Obj) -> Column:
    installed = o.text("outcome") == "installed"
    start, eh, members, reason = (o.has(k) for k in ("start", "event_horizon", "members", "reason"))
    return (
        F.when(installed & ~(start & eh & members), _s("an installed config needs start, event_horizon and members"))
        .when(installed & reason, _s("an installed config has no reason"))
        .when(installed & _has_duplicates(o, o.items("members")), _s("members lists a node twice"))
        .when(installed, F.lit(None).cast("string"))
        .when(~reason, _s("a refused config needs a reason"))
        .when(start | eh | members, _s("a refused config has no start, event_horizon or members"))
    )


_RULES: dict[type[BaseModel], Callable[[Any], Column]] = {
    Decision: _decision_rules,
    ConfigCommand: _config_command_rules,
    View: _view_rules,
    ConfigReport: _config_report_rules,
}


def _models_with_rules(model: type[BaseModel], seen: set[type[BaseModel]]) -> Iterator[type[BaseModel]]:
    if model in seen:
        return
    seen.add(model)
    if model.__pydantic_decorators__.model_validators:
        after = [d for d in model.__pydantic_decorators__.model_validators.values() if d.info.mode == "after"]
        if after:
            yield model
    for f in _fields(model):
        spec = f.spec.item if isinstance(f.spec, _List) else f.spec
        if isinstance(spec, _Model):
            yield from _models_with_rules(spec.model, seen)


def _check_rules_cover_contract() -> None:
    seen: set[type[BaseModel]] = set()
    for model in MODELS.values():
        for ruled in _models_with_rules(model, seen):
            if ruled not in _RULES:
                raise TypeError(f"{ruled.__name__} has a model validator without a SQL twin in {__name__}")


_check_rules_cover_contract()


# ---------------------------------------------------------------- the fast path (valid records)
# Most records are valid, and proving that is much cheaper than explaining why one is not:
# * no JSON null at all: the text has no ``null`` token (a string containing "null" just takes
#   the slow path);
# * ``schema_of_variant`` of the record -- keys sorted, types exact (BIGINT is an integer, DECIMAL
#   and DOUBLE are not) -- is one of the shapes generated from the model: no unknown key at any
#   level, every required field there, every value of the right JSON type;
# * then the values, read once through the typed struct: bounds, patterns, lengths, enums, and the
#   same cross-field rules as the slow path.
# A record that passes is valid (the parity test checks it); any other goes through the checks
# that name the field. The fast path only ever decides "valid".
def _shapes(spec: Any) -> list[str]:
    """Every ``schema_of_variant`` text a value of ``spec`` can have (types exact, keys sorted).

    A list shows as ARRAY<VOID> when empty, and a list of objects as the merge of its items (an
    optional field present in one item shows); the values themselves are checked afterwards.
    """
    if isinstance(spec, _Int):
        return ["BIGINT"]
    if isinstance(spec, _Str | _Lit):
        return ["STRING"]
    if isinstance(spec, _List):
        return ["ARRAY<VOID>", *(f"ARRAY<{item}>" for item in _shapes(spec.item))]
    out = [""]
    for f in sorted(_fields(spec.model), key=lambda f: f.name.encode()):  # variants sort keys by bytes
        present = [f"{f.name}: {shape}" for shape in _shapes(f.spec)]
        options = present if f.required else [None, *present]
        out = [f"{head}, {part}" if head and part else head or part or "" for head in out for part in options]
    if len(out) > 10_000:
        raise TypeError(f"{spec.model.__name__}: too many shapes for an IN list")
    return [f"OBJECT<{body}>" for body in out]


def _typed_ok(spec: Any, c: Column) -> Column:
    """``c`` (typed, known to have the right JSON type) meets the field's constraints."""
    if isinstance(spec, _Int):
        ok = c >= spec.ge
        return ok & (c <= spec.le) if spec.le < INT64_MAX else ok
    if isinstance(spec, _Lit):
        return c.isin(*spec.values)
    if isinstance(spec, _Str):
        ok = F.lit(True)
        if spec.min_len is not None:
            ok = ok & (F.length(c) >= spec.min_len)
        if spec.max_len is not None:
            ok = ok & (F.length(c) <= spec.max_len)
        if spec.pattern is not None:
            ok = ok & c.rlike(_java_pattern(spec.pattern))
        return ok
    if isinstance(spec, _List):
        ok = F.forall(c, lambda it: F.coalesce(_typed_ok(spec.item, it), F.lit(False)))
        return ok & (F.size(c) >= spec.min_len) if spec.min_len else ok
    ok = c.isNotNull()
    for f in _fields(spec.model):
        value = c[f.name]
        checked = F.coalesce(_typed_ok(f.spec, value), F.lit(False))
        ok = ok & (checked if f.required else (value.isNull() | checked))
    rules = _RULES.get(spec.model)
    return ok & rules(_Typed(c)).isNull() if rules is not None else ok


def _fast_valid(doc: Column, s: Column, typed: Column, tstr: Column) -> Column:
    shape = _vtype(doc)
    out = F.when(F.instr(s, "null") > 0, F.lit(False))
    for name, model in MODELS.items():
        # an IN list is a hash lookup; a regex with optional groups costs several times more
        out = out.when(tstr == name, shape.isin(*_shapes(_Model(model))) & _typed_ok(_Model(model), typed))
    return F.coalesce(out.otherwise(F.lit(False)), F.lit(False))


# ------------------------------------------------------------------------------ the whole record
def _wide_null(doc: Column) -> Column:
    """A NULL (never anything else) of a struct type wider than ``spark.sql.codegen.maxFields``.

    Whole-stage codegen inlines every Project of a stage into one Java method; these checks make
    it far bigger than the 8000 bytes HotSpot JIT-compiles, and it then runs interpreted, several
    times slower. Spark leaves operators whose input or output schema has more than maxFields
    (100) fields out of whole-stage codegen and evaluates them with an UnsafeProjection, which
    splits the code into small methods. Carrying this column through the checks does that; it is
    read (``to_json``, on the NULL branch only) at the end so the optimizer neither folds nor
    prunes it. Cost: one failed key lookup and one null bit per row. (A record carrying that key
    is invalid anyway: an unknown field.)
    """
    wide = ",".join(f"f{i}:boolean" for i in range(128))
    return F.try_variant_get(doc, "$.__replimon_never__", f"struct<{wide}>")


def _utf8_error_position(value: Column, s: Column) -> Column:
    """Byte offset of the first invalid UTF-8 sequence (as Python's ``UnicodeDecodeError.start``).

    ``make_valid_utf8`` puts U+FFFD where bytes are bad; a U+FFFD that was in the input (EF BF BD)
    is skipped by checking the original bytes at each one's offset.
    """
    segments = F.split(F.make_valid_utf8(s), "\ufffd", -1)
    start = F.struct(F.lit(0).alias("off"), F.lit(-1).alias("at"))

    def step(acc: Column, seg: Column) -> Column:
        off = acc["off"] + F.octet_length(seg)
        genuine = F.substring(value, off + 1, 3) == F.lit(bytearray(b"\xef\xbf\xbd"))
        return (
            F.when(acc["at"] >= 0, acc)
            .when(genuine, F.struct((off + 3).alias("off"), F.lit(-1).alias("at")))
            .otherwise(F.struct(off.alias("off"), off.alias("at")))
        )

    return F.aggregate(F.slice(segments, 1, F.size(segments) - 1), start, step)["at"]


def _too_deep(s: Column) -> Column:
    """Nested deeper than pydantic's parser accepts (it then says ``not JSON``).

    Counted only for records with at least MAX_DEPTH brackets: a scan over the characters that
    skips strings (depth of a value: 1 for a scalar, 1 + its deepest child for a list/object).
    """
    brackets = F.length(s) - F.length(F.translate(s, "[{", ""))
    start = F.struct(F.lit(0).alias("d"), F.lit(0).alias("mx"), F.lit(False).alias("q"), F.lit(False).alias("esc"))

    def step(acc: Column, c: Column) -> Column:
        d, mx, q, esc = acc["d"], acc["mx"], acc["q"], acc["esc"]

        def st(d2: Column, mx2: Column, q2: Column, esc2: Column) -> Column:
            return F.struct(d2.alias("d"), mx2.alias("mx"), q2.alias("q"), esc2.alias("esc"))

        t, f = F.lit(True), F.lit(False)
        return (
            F.when(q & esc, st(d, mx, q, f))
            .when(q & (c == "\\"), st(d, mx, q, t))
            .when(q & (c == '"'), st(d, mx, f, f))
            .when(q, acc)
            .when(c.isin("[", "{"), st(d + 1, F.greatest(mx, d + 1), f, f))
            .when(c.isin("]", "}"), st(d - 1, mx, f, f))
            .when(c == '"', st(d, F.greatest(mx, d + 1), t, f))
            .when(c.rlike(r"[-0-9a-zA-Z]"), st(d, F.greatest(mx, d + 1), f, f))
            .otherwise(acc)
        )

    deepest = F.aggregate(F.split(s, ""), start, step)["mx"]
    return (brackets >= MAX_DEPTH) & (deepest > MAX_DEPTH)


def _top() -> _Where:
    return _Where(None, _s("$"))


def _top_fields() -> dict[tuple[str, Any, bool], _Field]:
    """Every distinct top-level field of the event types (the envelope's once), but ``type``."""
    return {_field_key(f): f for model in MODELS.values() for f in _fields(model) if f.name != "type"}


def _top_field_checks(doc_map: Column, s: Column, when: Column) -> list[Column]:
    """One column per top-level field: its errors (NULL: none, or not checked for this row)."""
    return [
        F.when(when, _field_errors(f, doc_map, _top(), s)).alias(f"_f{i}")
        for i, f in enumerate(_top_fields().values())
    ]


def _record_errors(doc_map: Column, s: Column) -> Column:
    """The errors of a JSON object, dispatched on ``type`` as parse_event's tagged union does;
    the fields' own errors come from the ``_f<i>`` columns, shared by the types."""
    columns = {key: F.col(f"_f{i}") for i, key in enumerate(_top_fields())}
    t = doc_map["type"]
    tstr = _str(t)
    out = F.when(t.isNull(), F.array(_err("type: missing")))
    for name, model in MODELS.items():
        out = out.when(tstr == name, _model_errors(model, t, _top(), s, obj=doc_map, columns=columns))
    tags = ", ".join(EVENT_TYPES)
    return out.otherwise(F.array(_err(f"type: must be one of {tags} (got {_MARK})", t, _INLINE, _s("$.type"))))


def _reason(errs: Column, s: Column) -> Column:
    """The first error, rendered, and how many more there are: parse_event's one line."""
    n = F.size(errs)
    first = _get(errs)
    more = F.when(n > 1, F.concat(_s(" (+"), (n - 1).cast("string"), _s(" more)"))).otherwise(_s(""))
    return F.when(n > 0, F.concat(_render(first, _repr(first["val"], s, first["path"])), more))


def _topic_error(topic: Column, etype: Column, topic_types: Mapping[str, str] | None) -> Column:
    if topic_types is None:
        return F.lit(None).cast("string")
    expected = F.create_map(*[F.lit(x) for kv in sorted(topic_types.items()) for x in kv])
    want = expected[topic]
    known = ", ".join(sorted(topic_types))
    return (
        F.when(want.isNull(), F.concat(
            _s("topic: "), _str_repr(topic), _s(f" is not an input topic (expected one of {known})")))
        .when(want != etype, F.concat(
            _s("type: "), _str_repr(etype), _s(" does not belong on topic "), _str_repr(topic),
            _s(" (it carries "), want, _s(" events)")))
    )


_CACHE: dict[tuple[str, str, str], Any] = {}


def _cached(df: DataFrame, name: str, build: Callable[[], Any]) -> Any:
    """The big expressions, built once per Spark application.

    They only name columns (``_doc``, ``_s``...), so one tree serves every DataFrame; building it
    is thousands of py4j calls (seconds), analysing it is the JVM's business.
    """
    sc = df.sparkSession.sparkContext
    key = (sc.applicationId, str(sc.startTime), name)
    if key not in _CACHE:
        _CACHE.clear() if len(_CACHE) > 8 else None
        _CACHE[key] = build()
    return _CACHE[key]


@contextmanager
def _duplicate_keys(spark: Any, allow: bool) -> Iterator[None]:
    """parse_json reads this flag when the plan is analysed: set it around the plan's construction."""
    old = spark.conf.get(_DUP_KEYS_CONF, None)
    spark.conf.set(_DUP_KEYS_CONF, "true" if allow else "false")
    try:
        yield
    finally:
        if old is None:
            spark.conf.unset(_DUP_KEYS_CONF)
        else:
            spark.conf.set(_DUP_KEYS_CONF, old)


def check_events(
    df: DataFrame,
    topic_types: Mapping[str, str] | None = DEFAULT_TOPIC_TYPES,
    *,
    allow_duplicate_keys: bool = True,
) -> DataFrame:
    """One row per input record: the Kafka columns, ``error`` (NULL when valid) and typed fields.

    (``error``, not ``reason``: a config report has a contract field called ``reason``.)

    ``split_events`` is two filters over this frame; in a ``foreachBatch`` persist it once and
    write both sides from it so the records are parsed once.
    """
    if topic_types is not None:
        wrong = {t for t in topic_types.values() if t not in EVENT_TYPES}
        if wrong:
            raise ValueError(f"topic_types maps to unknown event types {sorted(wrong)}")
    schema = contract_schema()
    value = F.col("value")
    s = F.col("_s")
    with _duplicate_keys(df.sparkSession, allow_duplicate_keys):
        pre = (
            F.when(value.isNull(), _s("empty message (null value)"))
            .when(F.octet_length(value) > MAX_BYTES, F.concat(
                _s("message of "), F.octet_length(value).cast("string"), _s(" bytes exceeds the 1 MiB limit")))
            .when(~F.is_valid_utf8(s), F.concat(
                _s("not UTF-8: invalid byte at position "), _utf8_error_position(value, s).cast("string")))
        )
        frame = df.select(*[F.col(c) for c in KAFKA_COLUMNS]).withColumn("_s", value.cast("string"))
        frame = frame.withColumn("_pre", pre)
        # '[' value ',0]' parses to exactly two elements iff value is one JSON value and nothing else
        frame = frame.withColumn(
            "_w", F.when(F.col("_pre").isNull(), F.try_parse_json(F.concat(_s("["), s, _s("\n,0]"))))
        )
        w = F.col("_w")
        # (variant_get to any type but variant builds a Cast expression per row: slow)
        single = F.try_variant_get(w, "$[1]", "variant").isNotNull() & F.try_variant_get(w, "$[2]", "variant").isNull()
        frame = frame.select(
            *[F.col(c) for c in KAFKA_COLUMNS], "_s", "_pre",
            F.when(single, F.try_variant_get(w, "$[0]", "variant")).alias("_doc"),
            # the typed record: from_json with the contract's schema (exact once the fast path
            # has seen the JSON types; never used otherwise)
            F.from_json(s, schema).alias("_typed"),
        )
        doc, typed = F.col("_doc"), F.col("_typed")
        frame = frame.select(
            "*",
            _wide_null(doc).alias("_wide"),
            (doc.isNotNull() & _cached(df, "fast", lambda: _fast_valid(doc, s, typed, typed["type"]))).alias("_fast"),
        )
        # the slow path: only for records the fast path did not prove valid; one column per step
        # (each is compiled on its own: one expression holding all of it would pass 64 KB)
        fast, slow = F.col("_fast"), ~F.col("_fast")
        frame = frame.withColumn("_m", F.when(slow, doc.try_cast("map<string,variant>")))
        m = F.col("_m")
        frame = frame.select("*", *_cached(df, "fields", lambda: _top_field_checks(m, s, slow)))
        errs = (
            F.when(fast, F.lit(None).cast(_ERRS_TYPE))
            .when(F.col("_pre").isNotNull(), F.array(_err(F.col("_pre"))))
            .when(doc.isNull(), F.array(_err("not JSON")))
            .when(m.isNull(), F.array(_err("not a JSON object")))
            .otherwise(_cached(df, "record", lambda: _record_errors(m, s)))
        )
        frame = frame.select(*[F.col(c) for c in KAFKA_COLUMNS], "_s", "_doc", "_typed", "_wide", "_fast", "_m",
                             errs.alias("_errs"))
        # nested deeper than pydantic's parser goes: "not JSON" there, whatever else is wrong
        too_deep = (F.size("_errs") > 0) & m.isNotNull() & _too_deep(s)
        frame = frame.withColumn("_errs", F.when(too_deep, F.array(_err("not JSON"))).otherwise(F.col("_errs")))
        tstr = F.try_variant_get(doc, "$.type", "string")
        error = F.when(fast, _topic_error(F.col("topic"), typed["type"], topic_types)).otherwise(
            F.coalesce(_cached(df, "reason", lambda: _reason(F.col("_errs"), s)),
                       _topic_error(F.col("topic"), tstr, topic_types))
        )
        one_line = F.replace(F.replace(error, _s("\n"), _s("\\n")), _s("\r"), _s("\\r"))
        frame = frame.select(
            *[F.col(c) for c in KAFKA_COLUMNS],
            F.coalesce(one_line, F.to_json(F.col("_wide"))).alias("error"),
            typed.alias("_typed"),
        )
        fields = []
        for f in schema.fields:
            col = typed[f.name]
            if f.name == "count":  # the contract's default
                col = F.when(typed["type"] == "decision", F.coalesce(col, F.lit(1)))
            col = F.when(F.col("error").isNull(), col)
            fields.append(col.alias(f.name))
        return frame.select(*[F.col(c) for c in KAFKA_COLUMNS], "error", *fields)


def split_events(
    df: DataFrame,
    topic_types: Mapping[str, str] | None = DEFAULT_TOPIC_TYPES,
    *,
    allow_duplicate_keys: bool = True,
) -> tuple[DataFrame, DataFrame]:
    """``(valid, dead)`` from a DataFrame with the Kafka source columns.

    ``valid``: one row per contract-valid event on its right topic -- every contract field typed
    (``contract_schema()``; ``count`` defaults to 1 on decisions) plus topic, partition, offset.
    ``dead``: key, raw value, topic, partition, offset, Kafka timestamp and a one-line ``reason``.

    ``topic_types`` maps each input topic to the event type it carries (default: the topic names of
    ``replimon.config.Topics``); ``None`` skips the topic check. ``allow_duplicate_keys`` mirrors
    parse_event (the last value of a repeated key wins); ``False`` sends such records to the dead
    letters as ``not JSON``.
    """
    checked = check_events(df, topic_types, allow_duplicate_keys=allow_duplicate_keys)
    names = [f.name for f in contract_schema().fields]
    valid = checked.where(F.col("error").isNull()).select(*names, "topic", "partition", "offset")
    dead = checked.where(F.col("error").isNotNull()).select(
        *[F.col(c) for c in KAFKA_COLUMNS], F.col("error").alias("reason")
    )
    return valid, dead


def pack_events(df: DataFrame, topic_types: Mapping[str, str] | None, buckets: int) -> DataFrame:
    """The job's single-pass form (``replimon.streaming.validate_arrow.pack_events``' columns):
    ``bucket`` (the same ``bucket_of``), ``group`` (``DEAD_KEY`` for a dead letter), ``events`` (a
    JSON array of one item: the valid event with its topic, partition and offset, or the dead
    letter) and ``event_ms``."""
    from replimon.streaming.validate_arrow import DEAD_BUCKET, DEAD_KEY

    checked = check_events(df, topic_types)
    names = [f.name for f in contract_schema().fields]
    ok = F.col("error").isNull()
    item = F.to_json(F.array(F.struct(
        F.col("topic").alias("t"), F.col("partition").alias("p"), F.col("offset").alias("o"),
        F.struct(*names).alias("e"))))  # to_json leaves absent optionals out, as the contract does
    dead = F.to_json(F.array(F.struct(
        F.col("topic"), F.col("partition"), F.col("offset"),
        F.coalesce(F.base64(F.col("value")), F.lit("")).alias("raw_b64"), F.col("error").alias("reason"),
        F.unix_millis(F.col("timestamp")).alias("kafka_ts"))))
    bucket = F.pmod(F.crc32(F.col("group").cast("binary")), F.lit(buckets)).cast("int")
    return checked.select(
        F.when(ok, bucket).otherwise(F.lit(DEAD_BUCKET)).alias("bucket"),
        F.when(ok, F.col("group")).otherwise(F.lit(DEAD_KEY)).alias("group"),
        F.when(ok, item).otherwise(dead).alias("events"),
        F.when(ok, F.col("ts_ms")).otherwise(F.lit(0).cast("long")).alias("event_ms"))
