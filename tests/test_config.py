"""Settings: defaults == conf/replimon.yaml, precedence (kwargs > env > YAML > defaults), one-line errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel, ValidationError

from replimon.config import ConfigError, Settings, Thresholds, load_settings

ROOT = Path(__file__).resolve().parents[1]
YAML_FILE = ROOT / "conf" / "replimon.yaml"


pytestmark = pytest.mark.usefixtures("clean_env")


def write(tmp_path: Path, text: str, name: str = "replimon.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def config_error(**kwargs: Any) -> str:
    with pytest.raises(ConfigError) as info:
        load_settings(**kwargs)
    message = str(info.value)
    assert message and "\n" not in message, f"not one line: {message!r}"
    assert "Traceback" not in message
    return message


# ----------------------------------------------------------------------------- defaults == YAML
def test_load_from_repo_root_equals_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    assert load_settings() == Settings()
    assert load_settings(YAML_FILE) == Settings()


def test_without_a_file_the_defaults_apply() -> None:
    # the autouse fixture put us in an empty directory: no conf/replimon.yaml here
    assert load_settings() == Settings()


def _walk(model: type[BaseModel], data: dict[str, Any], where: str = "") -> list[str]:
    """Dotted names of keys in ``data`` that ``model`` does not have (recursively)."""
    unknown = []
    for key, value in data.items():
        name = f"{where}{key}"
        field = model.model_fields.get(key)
        if field is None:
            unknown.append(name)
            continue
        sub = field.annotation
        if isinstance(sub, type) and issubclass(sub, BaseModel):
            assert isinstance(value, dict), f"{name} should be a mapping in the YAML"
            unknown += _walk(sub, value, f"{name}.")
    return unknown


def _missing(model: type[BaseModel], data: dict[str, Any], where: str = "") -> list[str]:
    """Dotted names of ``model`` fields that ``data`` does not set (recursively)."""
    missing = []
    for key, field in model.model_fields.items():
        name = f"{where}{key}"
        if key not in data:
            missing.append(name)
            continue
        sub = field.annotation
        if isinstance(sub, type) and issubclass(sub, BaseModel):
            missing += _missing(sub, data[key], f"{name}.")
    return missing


def test_yaml_has_no_unknown_keys() -> None:
    data = yaml.safe_load(YAML_FILE.read_text(encoding="utf-8"))
    assert set(data) == set(Settings.model_fields)
    assert _walk(Settings, data) == []


def test_yaml_lists_every_setting() -> None:
    data = yaml.safe_load(YAML_FILE.read_text(encoding="utf-8"))
    assert _missing(Settings, data) == []


def test_yaml_values_are_the_defaults() -> None:
    data = yaml.safe_load(YAML_FILE.read_text(encoding="utf-8"))
    defaults = Settings().model_dump(mode="json")

    def compare(yaml_part: dict[str, Any], dump_part: dict[str, Any], where: str) -> None:
        for key, value in yaml_part.items():
            if isinstance(value, dict):
                compare(value, dump_part[key], f"{where}{key}.")
            else:
                assert value == dump_part[key], f"{where}{key}: YAML {value!r} != default"

    compare(data, defaults, "")


# ----------------------------------------------------------------------------------- precedence
def test_yaml_wins_over_defaults(tmp_path: Path) -> None:
    path = write(tmp_path, "thresholds:\n  node_silent_s: 9\nkafka:\n  topics:\n    alerts: a\n")
    s = load_settings(path)
    assert s.thresholds.node_silent_s == 9.0
    assert s.kafka.topics.alerts == "a"
    # everything the file does not set keeps its default
    assert s.thresholds.skew_s == Thresholds().skew_s
    assert s.kafka.topics.decisions == "replica.decisions"
    assert s.model_copy(update={"thresholds": Thresholds(), "kafka": Settings().kafka}) == Settings()


def test_default_file_is_found_in_the_working_directory(tmp_path: Path) -> None:
    (tmp_path / "conf").mkdir()
    write(tmp_path / "conf", "simulator:\n  groups: 7\n")
    assert load_settings().simulator.groups == 7


def test_env_override_of_a_nested_value_wins_over_yaml(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write(tmp_path, "thresholds:\n  node_silent_s: 9\n  skew_s: 3\n")
    monkeypatch.setenv("REPLIMON_THRESHOLDS__NODE_SILENT_S", "8")
    s = load_settings(path)
    assert s.thresholds.node_silent_s == 8.0
    assert s.thresholds.skew_s == 3.0  # the sibling from the file survives the env override


def test_env_override_two_levels_deep(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path, "kafka:\n  topics:\n    alerts: yaml-alerts\n  producer:\n    linger_ms: 7\n")
    monkeypatch.setenv("REPLIMON_KAFKA__TOPICS__STATE", "env-state")
    monkeypatch.setenv("REPLIMON_KAFKA__PRODUCER__LINGER_MS", "9")
    s = load_settings(path)
    assert (s.kafka.topics.alerts, s.kafka.topics.state) == ("yaml-alerts", "env-state")
    assert s.kafka.producer.linger_ms == 9


def test_env_override_without_a_file(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REPLIMON_KAFKA__BOOTSTRAP_SERVERS", "broker:9092")
    assert load_settings().kafka.bootstrap_servers == "broker:9092"


def test_keyword_overrides_win_over_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REPLIMON_THRESHOLDS__NODE_SILENT_S", "8")
    s = load_settings(thresholds={"node_silent_s": 4})
    assert s.thresholds.node_silent_s == 4.0


def test_replimon_config_env_selects_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env_file = write(tmp_path, "simulator:\n  groups: 11\n", "env.yaml")
    flag_file = write(tmp_path, "simulator:\n  groups: 12\n", "flag.yaml")
    monkeypatch.setenv("REPLIMON_CONFIG", str(env_file))
    assert load_settings().simulator.groups == 11
    assert load_settings(flag_file).simulator.groups == 12  # an explicit path wins


def test_empty_yaml_means_defaults(tmp_path: Path) -> None:
    assert load_settings(write(tmp_path, "# nothing\n")) == Settings()


# ------------------------------------------------------------------------------------- errors
YAML_ERRORS = [
    ("negative", "thresholds:\n  node_silent_s: -1\n", ["thresholds.node_silent_s"]),
    ("zero-where-positive", "thresholds:\n  horizon_wedge_s: 0\n", ["thresholds.horizon_wedge_s"]),
    ("negative-nested", "kafka:\n  producer:\n    linger_ms: -5\n", ["kafka.producer.linger_ms"]),
    ("wrong-type", "thresholds:\n  node_silent_s: soon\n", ["thresholds.node_silent_s"]),
    ("wrong-type-int", "kafka:\n  partitions: four\n", ["kafka.partitions"]),
    ("list-for-number", "simulator:\n  groups: [1, 2]\n", ["simulator.groups"]),
    ("section-not-mapping", "thresholds: 5\n", ["thresholds"]),
    ("unknown-key", "thresholds:\n  node_silence_s: 5\n", ["thresholds.node_silence_s", "unknown"]),
    ("unknown-nested-key", "kafka:\n  topics:\n    alert: x\n", ["kafka.topics.alert", "unknown"]),
    ("unknown-section", "threshold:\n  node_silent_s: 5\n", ["threshold", "unknown"]),
    ("pattern", "kafka:\n  producer:\n    compression: brotli\n", ["kafka.producer.compression"]),
    ("too-many-nodes", "simulator:\n  nodes: 12\n", ["simulator.nodes"]),
    ("eh-min-above-max", "thresholds:\n  event_horizon_min: 300\n",
     ["thresholds", "event_horizon_min"]),
    ("default-eh-outside", "thresholds:\n  default_event_horizon: 500\n",
     ["thresholds", "default_event_horizon"]),
    ("bad-syntax", "thresholds:\n  node_silent_s: [1\n", ["not valid YAML", "line"]),
    ("tab-indent", "thresholds:\n\tnode_silent_s: 1\n", ["not valid YAML"]),
    ("top-level-list", "- thresholds\n", ["mapping"]),
    ("unknown-family", "families:\n  'pg*': raft\n", ["families", "'raft'", "known: chain, gen, qlog, xcom"]),
]


@pytest.mark.parametrize(("text", "words"), [pytest.param(t, w, id=i) for i, t, w in YAML_ERRORS])
def test_bad_yaml_raises_one_line_config_error(tmp_path: Path, text: str, words: list[str]) -> None:
    path = write(tmp_path, text)
    message = config_error(path=path)
    assert str(path) in message
    for word in words:
        assert word in message, f"{word!r} not in {message!r}"


def test_missing_file(tmp_path: Path) -> None:
    message = config_error(path=tmp_path / "nope.yaml")
    assert "nope.yaml" in message and "cannot read" in message


def test_missing_file_named_by_replimon_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REPLIMON_CONFIG", str(tmp_path / "nope.yaml"))
    assert "nope.yaml" in config_error()


def test_directory_instead_of_file(tmp_path: Path) -> None:
    assert "cannot read" in config_error(path=tmp_path)


ENV_ERRORS = [
    ("REPLIMON_THRESHOLDS__SKEW_S", "-1", "thresholds.skew_s"),
    ("REPLIMON_THRESHOLDS__NODE_SILENT_S", "soon", "thresholds.node_silent_s"),
    ("REPLIMON_THRESHOLDS__NODE_SILENT_S", "0", "thresholds.node_silent_s"),
    ("REPLIMON_KAFKA__PARTITIONS", "x", "kafka.partitions"),
    ("REPLIMON_KAFKA__PRODUCER__LINGER_MS", "-5", "kafka.producer.linger_ms"),
    ("REPLIMON_SIMULATOR__NODES", "10", "simulator.nodes"),
    ("REPLIMON_THRESHOLDS__NODE_SILENCE_S", "5", "thresholds.node_silence_s"),
]


@pytest.mark.parametrize(("var", "value", "field"), ENV_ERRORS)
@pytest.mark.parametrize("with_file", [False, True], ids=["no-file", "repo-yaml"])
def test_bad_env_value_names_field_and_variable(
    monkeypatch: pytest.MonkeyPatch, var: str, value: str, field: str, with_file: bool
) -> None:
    if with_file:
        monkeypatch.chdir(ROOT)
    monkeypatch.setenv(var, value)
    message = config_error()
    assert field in message
    assert var in message
    if with_file:
        assert "replimon.yaml" not in message  # the file is not to blame


def test_lower_case_env_var_is_named_too(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("replimon_thresholds__skew_s", "-1")
    message = config_error()
    assert "thresholds.skew_s" in message
    assert "REPLIMON_THRESHOLDS__SKEW_S" in message


@pytest.mark.parametrize("with_file", [False, True], ids=["no-file", "repo-yaml"])
def test_env_value_breaking_a_cross_field_rule_names_the_variable(
    monkeypatch: pytest.MonkeyPatch, with_file: bool
) -> None:
    if with_file:
        monkeypatch.chdir(ROOT)
    monkeypatch.setenv("REPLIMON_THRESHOLDS__EVENT_HORIZON_MIN", "300")
    message = config_error()
    assert "event_horizon_min" in message
    assert "REPLIMON_THRESHOLDS__EVENT_HORIZON_MIN" in message
    assert "replimon.yaml" not in message


def test_config_error_is_a_value_error() -> None:
    assert issubclass(ConfigError, ValueError)


# ------------------------------------------------------------------------------------- frozen
def test_settings_are_frozen() -> None:
    s = load_settings()
    with pytest.raises(ValidationError):
        s.thresholds = Thresholds()  # type: ignore[misc]
    with pytest.raises(ValidationError):
        s.thresholds.node_silent_s = 1.0  # type: ignore[misc]
    with pytest.raises(ValidationError):
        s.kafka.topics.alerts = "x"  # type: ignore[misc]
    assert s.thresholds.node_silent_s == 5.0
    assert hash(s.thresholds) == hash(Thresholds())  # frozen models are hashable


# ----------------------------------------------------------------------------- topics
def test_input_types_map_each_input_topic_to_its_event_type() -> None:
    topics = load_settings(kafka={"topics": {"decisions": "d", "config": "cfg"}}).kafka.topics
    assert topics.input_types == {"d": "decision", "replica.executions": "execution",
                                  "replica.heartbeats": "heartbeat", "cfg": "config"}
    assert list(topics.input_types) == list(topics.inputs)  # the order the job subscribes in
    assert all(topics.for_event_type(etype) == topic for topic, etype in topics.input_types.items())
    with pytest.raises(KeyError):
        topics.for_event_type("alert")


def test_families_pin_groups_in_order(tmp_path: Path) -> None:
    path = write(tmp_path, "families:\n  pg-special: xcom\n  'pg*': gen\n")
    assert load_settings(path=path).family_pins == (("pg-special", "xcom"), ("pg*", "gen"))
    assert load_settings(path=write(tmp_path, "kafka: {}\n", "empty.yaml")).family_pins == ()


def test_chain_thresholds_in_the_file_and_in_the_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/families.md 5.3: chain_wedge_s and chain_view_stale_s, 10 s each, overridable; the
    lease lengths are the events' own (no threshold)."""
    from replimon.core.limits import Limits

    conf = yaml.safe_load((Path(__file__).resolve().parents[1] / "conf" / "replimon.yaml").read_text())
    assert (conf["thresholds"]["chain_wedge_s"], conf["thresholds"]["chain_view_stale_s"]) == (10, 10)
    lim = Limits.from_settings(Settings())
    assert (lim.chain_wedge_ms, lim.chain_view_stale_ms) == (10_000, 10_000)
    monkeypatch.setenv("REPLIMON_THRESHOLDS__CHAIN_WEDGE_S", "3")
    lim = Limits.from_settings(load_settings(thresholds={"chain_view_stale_s": 4.5}))
    assert (lim.chain_wedge_ms, lim.chain_view_stale_ms) == (3000, 4500)
    assert not any("ttl" in name for name in Thresholds.model_fields)
