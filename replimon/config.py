"""Every setting replimon has, in one frozen tree, read from exactly one place.

Sources, highest priority first:

1. keyword arguments (tests, CLI flags that override a setting);
2. environment variables ``REPLIMON_<SECTION>__<FIELD>`` (for example
   ``REPLIMON_KAFKA__BOOTSTRAP_SERVERS`` or ``REPLIMON_THRESHOLDS__NODE_SILENT_S``);
3. the YAML file: ``--config PATH``, else ``$REPLIMON_CONFIG``, else ``conf/replimon.yaml`` when it
   exists in the working directory;
4. the defaults written below (the same values as ``conf/replimon.yaml``).

A wrong value raises :class:`ConfigError`, whose message is one line naming the field and the
problem; the CLI prints it and exits with status 2 (no traceback).
"""

from __future__ import annotations

import json
import os
from contextvars import ContextVar
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)
from pydantic_settings.exceptions import SettingsError

from replimon.contract.models import EVENT_TOPICS

DEFAULT_CONFIG_FILE = Path("conf/replimon.yaml")
ENV_CONFIG_FILE = "REPLIMON_CONFIG"
ENV_PREFIX = "REPLIMON_"
# Variables with the prefix that are not settings: the config file's path, the test suite's golden
# switch and the embedded PostgreSQL's user and binaries (replimon/embedded/postgres.py).
_ENV_NOT_SETTINGS = frozenset({ENV_CONFIG_FILE, "REPLIMON_GENERATE_GOLDEN_FILES", "REPLIMON_PG_USER",
                               "REPLIMON_PG_BINDIR"})


class ConfigError(ValueError):
    """A configuration value or file is wrong; ``str(err)`` is one line for the operator."""


class _Section(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


# The input topics' fields, by the contract event type each carries (docs/contract.md).
_INPUT_FIELDS = {"decision": "decisions", "execution": "executions", "heartbeat": "heartbeats",
                 "config": "config"}


class Topics(_Section):
    """Kafka topic names: the four input topics replica nodes publish to, one per event type
    (docs/contract.md), and the monitor's outputs (docs/architecture.md)."""

    decisions: str = "replica.decisions"
    executions: str = "replica.executions"
    heartbeats: str = "replica.heartbeats"
    config: str = "replica.config"
    alerts: str = "monitor.alerts"
    state: str = "monitor.state"
    dead_letters: str = "monitor.dead_letters"

    def for_event_type(self, event_type: str) -> str:
        """The input topic an event of contract type ``event_type`` is published to (every
        family's types share the four topics by role: docs/contract.md, "Protocol families")."""
        return str(getattr(self, EVENT_TOPICS[event_type]))

    @property
    def input_families(self) -> dict[str, frozenset[str]]:
        """``{topic: the event types it carries}``, every family's (XCom's type first in
        ``input_types``): a record of another type on the topic is a dead letter."""
        return {getattr(self, field): frozenset(t for t, f in EVENT_TOPICS.items() if f == field)
                for field in _INPUT_FIELDS.values()}

    @property
    def input_types(self) -> dict[str, str]:
        """``{topic: event type}`` of the input topics, in the order of `inputs`: what the job
        subscribes to, and the type a record on each must have (another is a dead letter)."""
        return {getattr(self, field): etype for etype, field in _INPUT_FIELDS.items()}

    @property
    def inputs(self) -> tuple[str, str, str, str]:
        return (self.decisions, self.executions, self.heartbeats, self.config)

    @property
    def all(self) -> tuple[str, ...]:
        return (*self.inputs, self.alerts, self.state, self.dead_letters)


class Producer(_Section):
    """Publisher tuning: how much may be buffered before ``publish`` blocks (back-pressure)."""

    linger_ms: int = Field(5, ge=0, le=10_000)
    max_buffered_messages: int = Field(100_000, ge=1, le=10_000_000)
    block_timeout_s: float = Field(30.0, gt=0)
    delivery_timeout_ms: int = Field(120_000, ge=1_000)
    compression: str = Field("lz4", pattern="^(none|gzip|snappy|lz4|zstd)$")


class Kafka(_Section):
    bootstrap_servers: str = Field("127.0.0.1:9092", min_length=1)
    client_id: str = "replimon"
    partitions: int = Field(4, ge=1, le=1024, description="partitions of topics replimon creates")
    replication_factor: int = Field(1, ge=1, le=16)
    topics: Topics = Topics()
    producer: Producer = Producer()


class Postgres(_Section):
    dsn: str = Field(
        "",
        description="libpq URI; empty means the embedded PostgreSQL that `replimon demo` starts",
    )


class Thresholds(_Section):
    """Rule parameters and their defaults (docs/rules.md, "Thresholds")."""

    event_horizon_min: int = Field(10, ge=1)
    event_horizon_max: int = Field(200, ge=1)
    default_event_horizon: int = Field(10, ge=1, description="compile-time default of old nodes")
    min_protocol_for_eh: int = Field(5, ge=0, description="x_1_4: first protocol that can reconfigure the event horizon")
    horizon_wedge_s: float = Field(10.0, gt=0)
    no_progress_s: float = Field(30.0, gt=0)
    pending_config_stuck_s: float = Field(60.0, gt=0)
    node_silent_s: float = Field(5.0, gt=0)
    executor_lag_instances: int = Field(1000, ge=1)
    executor_lag_s: float = Field(10.0, gt=0)
    group_silent_s: float = Field(15.0, gt=0)
    skew_s: float = Field(2.0, ge=0, description="tolerated cross-node event-time disorder")
    clock_skew_s: float = Field(300.0, gt=0, description="a node's clock further ahead than this is CLOCK_SKEW")
    gen_no_online_s: float = Field(15.0, gt=0, description="generations: no node online this long")
    gen_recovery_stuck_s: float = Field(60.0, gt=0, description="generations: a node in recovery this long")
    gen_vote_stuck_s: float = Field(30.0, gt=0, description="generations: a promised number nobody switched to")
    qlog_no_leader_s: float = Field(15.0, gt=0, description="quorum log: no member holds the lease this long")
    qlog_recover_stuck_s: float = Field(60.0, gt=0, description="quorum log: a recovery not completed this long")
    chain_wedge_s: float = Field(10.0, gt=0, description="chain: a wedged epoch not replaced by a view this long")
    chain_view_stale_s: float = Field(10.0, gt=0, description="chain: a member's expired lease not followed by a view without it this long")

    @model_validator(mode="after")
    def _domain_ordered(self) -> Thresholds:
        if self.event_horizon_min > self.event_horizon_max:
            raise ValueError("event_horizon_min must not exceed event_horizon_max")
        if not self.event_horizon_min <= self.default_event_horizon <= self.event_horizon_max:
            raise ValueError("default_event_horizon must lie inside [event_horizon_min, event_horizon_max]")
        return self


class Paths(_Section):
    data_dir: Path = Path("var/data")
    checkpoint_dir: Path = Path("var/checkpoints")


class Streaming(_Section):
    """Spark job settings (docs/streaming.md)."""

    master: str = "local[2]"
    trigger_interval_s: float = Field(0.5, gt=0)
    shuffle_partitions: int = Field(2, ge=1, le=10_000)
    max_offsets_per_trigger: int = Field(200_000, ge=1)
    source_format: str = Field("replimon-kafka", pattern="^(replimon-kafka|kafka)$")
    source_partitions: int = Field(0, ge=0, le=10_000, description="Spark tasks that read a micro-batch from Kafka (0: Spark's default parallelism)")
    state_buckets: int = Field(6, ge=1, le=1_000_000, description="groups share this many state keys (pinned in a checkpoint)")
    replay_checkpoint_s: float = Field(60.0, ge=0, description="each group's whole state goes to monitor.state as a checkpoint record when its event time crosses a multiple of this (replays start from them; 0: never)")
    snapshot_interval_s: float = Field(5.0, ge=0, description="live: a group's snapshot (group and node state, time-series points, monitor.state) at most this often, plus its first batch and any batch with its alerts; 0: every batch; replays: every batch")
    spark_conf: dict[str, str] = Field(default_factory=dict, description="extra Spark settings, e.g. spark.jars.packages for the built-in kafka source (docker-compose)")


class Quality(_Section):
    """Data quality (docs/quality.md): which micro-batches the streaming job validates
    with the Great Expectations suites, how many records it reads back, and the suites' bounds.

    A batch is validated when ``every_batches`` batches have passed since the last validated one
    or ``every_s`` seconds have (whichever comes first; 0 turns that trigger off); the first batch
    after a start always is. The defaults keep the cost far below the batch time (under 10 % of
    the throughput, bench/quality.py)."""

    enabled: bool = Field(True, description="validate micro-batches in the streaming job")
    every_batches: int = Field(0, ge=0, description="validate when this many batches have passed since the last validated one (0: not by count)")
    every_s: float = Field(30.0, ge=0, description="... or when this many seconds have (0: not by time)")
    sample_records: int = Field(2000, ge=1, le=10_000_000, description="at most this many input records of a batch are read back from Kafka and validated (whole groups)")
    sample_rows: int = Field(5, ge=1, le=100, description="failing rows kept per expectation (dq_results details, alert evidence)")
    max_clock_skew_s: float = Field(30.0, gt=0, description="a node's clock may differ from its group's by this much")
    future_tolerance_s: float = Field(60.0, ge=0, description="an event time may be this far ahead of the validating machine's clock")

    @model_validator(mode="after")
    def _some_cadence(self) -> Quality:
        if self.enabled and self.every_batches == 0 and self.every_s == 0:
            raise ValueError("every_batches and every_s cannot both be 0 (set enabled: false to turn validation off)")
        return self


class Simulator(_Section):
    """Defaults of `replimon simulate` and the demo fleet."""

    groups: int = Field(3, ge=1, le=100_000)
    nodes: int = Field(3, ge=1, le=9, description="XCom groups have at most 9 members")
    seed: int = 0
    tick_ms: int = Field(100, ge=10, le=10_000)
    decisions_per_s: float = Field(20.0, gt=0, le=100_000)
    heartbeat_interval_s: float = Field(1.0, gt=0)
    old_node_fraction: float = Field(0.2, ge=0, le=1)
    reconfig_every_s: float = Field(20.0, gt=0, description="mean time between legal reconfigurations per group")
    restart_every_s: float = Field(120.0, gt=0, description="mean time between node restarts per group")
    cache_size: int = Field(50_000, ge=1)


class Settings(BaseSettings):
    """The whole configuration (frozen)."""

    model_config = SettingsConfigDict(
        frozen=True,
        extra="forbid",
        env_prefix="REPLIMON_",
        env_nested_delimiter="__",
        case_sensitive=False,
    )

    kafka: Kafka = Kafka()
    postgres: Postgres = Postgres()
    thresholds: Thresholds = Thresholds()
    paths: Paths = Paths()
    streaming: Streaming = Streaming()
    simulator: Simulator = Simulator()
    quality: Quality = Quality()
    # Pins a group's protocol family: group id or glob -> family (the first match wins); other
    # groups take the family of their first event (docs/families.md, "Which family a group is").
    families: dict[str, str] = Field(default_factory=dict)

    @field_validator("families")
    @classmethod
    def _known_families(cls, value: dict[str, str]) -> dict[str, str]:
        from replimon.core.group import FAMILIES

        for pattern, family in value.items():
            if family not in FAMILIES:
                raise ValueError(f"group {pattern!r}: unknown protocol family {family!r} "
                                 f"(known: {', '.join(sorted(FAMILIES))})")
        return value

    @property
    def family_pins(self) -> tuple[tuple[str, str], ...]:
        """``families`` in order, as the monitor takes them."""
        return tuple(self.families.items())

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings, env_settings, _YamlDefaults(settings_cls))


_yaml_values: ContextVar[dict[str, Any] | None] = ContextVar("replimon_yaml_values", default=None)


class _YamlDefaults(PydanticBaseSettingsSource):
    """The YAML file's values (set by load_settings); below the environment, above the defaults."""

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        return (_yaml_values.get() or {}).get(field_name), field_name, False

    def __call__(self) -> dict[str, Any]:
        return dict(_yaml_values.get() or {})


class _UniqueKeyLoader(yaml.SafeLoader):
    """YAML's safe loader, refusing a mapping that names a key twice: PyYAML keeps the last one
    in silence, so a section written twice lost the first one's settings."""

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        seen: dict[Any, int] = {}
        for key_node, _value in node.value:
            key = self.construct_object(key_node, deep=True)
            try:
                first = seen.setdefault(key, key_node.start_mark.line + 1)
            except TypeError:  # an unhashable key: the base class says so
                break
            if first != key_node.start_mark.line + 1:
                raise yaml.constructor.ConstructorError(
                    None, None, f"key {key!r} is given twice (lines {first} and "
                    f"{key_node.start_mark.line + 1}); the second would silently replace the first",
                    key_node.start_mark)
        return super().construct_mapping(node, deep=deep)


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"config file {path}: cannot read it ({exc.strerror or exc})") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[:exc.start].count(b"\n") + 1
        raise ConfigError(f"config file {path} line {line}: not UTF-8 (byte 0x{raw[exc.start]:02x} at "
                          f"offset {exc.start})") from None
    try:
        data = yaml.load(text, Loader=_UniqueKeyLoader)  # a SafeLoader
    except yaml.constructor.ConstructorError as exc:
        mark = exc.problem_mark
        where = f" line {mark.line + 1}" if mark is not None else ""
        raise ConfigError(f"config file {path}{where}: {exc.problem}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        raise ConfigError(f"config file {path}{where}: not valid YAML") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path}: top level must be a mapping of sections")
    return data


def _one_line(exc: ValidationError, origin: str) -> str:
    err = exc.errors()[0]
    field = ".".join(str(p) for p in err["loc"]) or "(top level)"
    msg = str(err["msg"]).removeprefix("Value error, ")
    if err["type"] == "extra_forbidden":
        msg = "unknown setting"
    value = err.get("input")
    shown = "" if err["type"] == "missing" or isinstance(value, dict) else f" (got {value!r})"
    more = f" (+{len(exc.errors()) - 1} more)" if len(exc.errors()) > 1 else ""
    return f"config error in {origin}: {field}: {msg}{shown}{more}"


def config_path(explicit: str | Path | None = None) -> Path | None:
    """The YAML file that applies: explicit, else $REPLIMON_CONFIG, else conf/replimon.yaml if present."""
    if explicit:
        return Path(explicit)
    env = os.environ.get(ENV_CONFIG_FILE)
    if env:
        return Path(env)
    return DEFAULT_CONFIG_FILE if DEFAULT_CONFIG_FILE.is_file() else None


def _check_env_names() -> None:
    """An environment variable with the prefix must name a section (``REPLIMON_<SECTION>__...``):
    pydantic-settings ignores the others, so a typo (``REPLIMON_KAFKAA__X``,
    ``REPLIMON_KAFKA_BOOTSTRAP_SERVERS`` with one underscore) would silently change nothing.
    Unknown fields inside a known section are pydantic's to report (``extra="forbid"``)."""
    sections = set(Settings.model_fields)
    for name in sorted(os.environ):
        upper = name.upper()
        if not upper.startswith(ENV_PREFIX) or upper in _ENV_NOT_SETTINGS:
            continue
        section = upper.removeprefix(ENV_PREFIX).split("__", 1)[0].lower()
        if section not in sections:
            raise ConfigError(f"config error in environment ({upper}): unknown setting; variables are "
                              f"REPLIMON_<SECTION>__<FIELD> with SECTION one of {', '.join(sorted(sections))}")


def _structured(path: list[str]) -> bool:
    """Whether the setting at ``path`` (section, field, ...) is a map or a section: set from one
    environment variable, it must be a JSON object."""
    model: Any = Settings
    for part in path:
        fields = getattr(model, "model_fields", None)
        if not isinstance(fields, dict) or part not in fields:
            return False
        model = fields[part].annotation
    return isinstance(model, type) and issubclass(model, BaseModel) or getattr(model, "__origin__", None) is dict


def _env_parse_error(exc: SettingsError) -> ConfigError:
    """pydantic-settings could not parse a variable of a structured setting (a map such as
    ``streaming.spark_conf``, or a whole section) as JSON; its own message names only the section
    and comes with a long chain, so name the variable here."""
    for name in sorted(os.environ):
        upper = name.upper()
        if not upper.startswith(ENV_PREFIX) or upper in _ENV_NOT_SETTINGS:
            continue
        path = upper.removeprefix(ENV_PREFIX).lower().split("__")
        if not _structured(path):
            continue
        try:
            ok = isinstance(json.loads(os.environ[name]), dict)
        except ValueError:
            ok = False
        if not ok:
            return ConfigError(f"config error in environment ({upper}): {'.'.join(path)}: not a JSON "
                               "object (a map or a section set from one variable is JSON, e.g. "
                               "'{\"spark.ui.enabled\": \"false\"}'; or set one field with __FIELD)")
    return ConfigError(f"config error in environment: {str(exc).splitlines()[0]}")


def load_settings(path: str | Path | None = None, **overrides: Any) -> Settings:
    """Load the settings; raise :class:`ConfigError` (one line) on any wrong value."""
    _check_env_names()
    file = config_path(path)
    token = _yaml_values.set(_read_yaml(file) if file is not None else {})
    origin = str(file) if file is not None else "environment"
    try:
        return Settings(**overrides)
    except SettingsError as exc:
        raise _env_parse_error(exc) from None
    except ValidationError as exc:
        # Name the environment variable when that is where the value came from.
        loc = exc.errors()[0]["loc"]
        prefix = "REPLIMON_" + "__".join(str(p) for p in loc).upper()
        # A field error names its variable; a section's cross-field error, the section's variables.
        names = sorted(k.upper() for k in os.environ if k.upper() == prefix or k.upper().startswith(prefix + "__"))
        if names:
            origin = f"environment ({', '.join(names)})"
        raise ConfigError(_one_line(exc, origin)) from None
    finally:
        _yaml_values.reset(token)
