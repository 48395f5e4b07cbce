"""docker-compose.yml, Dockerfile and conf/docker.yaml, checked as far as a machine without a
Docker engine allows (docs/docker.md says what that leaves out).

- The compose file validates against the Compose Specification's JSON schema and the Dockerfile
  passes hadolint (each with a negative control, so neither check can pass vacuously).
- Cross-checks that catch drift between files that must agree: bind mounts and Grafana's paths
  (dashboards/common.py, the provisioning YAML), the job's addresses (the kafka and postgres
  services), the topics kafka-topics creates (replimon's config), the Spark Kafka package (the
  installed pyspark), the image's contents (setup.py's package folders, .dockerignore, the wheel
  its build context makes).
- The job's and the simulator's command lines parse with the real CLI; the simulator's, run
  offline into a file and through ``replimon check``, raises exactly the alerts it injects.
- The job's healthcheck command runs against the real PostgreSQL and its migrations.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path, PurePosixPath
from typing import Any

import psycopg
import pyspark
import pytest
import typer.main
import yaml

from replimon.cli import app, main
from replimon.config import load_settings
from replimon.dashboards import common
from replimon.producers.simulator import CATALOGUE, parse_injection
from tests.support.wheel import build_wheel, setup_py, tracked_files, wheel_names, wheel_of_tree

ROOT = Path(__file__).resolve().parents[1]
COMPOSE_FILE = ROOT / "docker-compose.yml"
DOCKERFILE = ROOT / "Dockerfile"
DOCKERIGNORE = ROOT / ".dockerignore"
HADOLINT_CONFIG = ROOT / ".hadolint.yaml"
DOCKER_CONF = ROOT / "conf" / "docker.yaml"
VENV_BIN = Path(sys.executable).parent

# No REPLIMON_* variable of the caller's shell may change what conf/docker.yaml loads as.
pytestmark = pytest.mark.usefixtures("clean_env")


# ---------------------------------------------------------------------------------- helpers
def compose() -> dict[str, Any]:
    data = yaml.safe_load(COMPOSE_FILE.read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def services() -> dict[str, dict[str, Any]]:
    return compose()["services"]


def service_using(image_prefix: str) -> tuple[str, dict[str, Any]]:
    """The one service whose image is ``image_prefix:<tag>``."""
    found = [(name, svc) for name, svc in services().items()
             if str(svc.get("image", "")).split(":")[0] == image_prefix]
    assert len(found) == 1, f"expected one service running {image_prefix}, found {[n for n, _ in found]}"
    return found[0]


def env_of(svc: dict[str, Any]) -> dict[str, str]:
    """A service's environment as a dict (compose allows a mapping or a list of KEY=VALUE)."""
    env = svc.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) for item in env)
    return {str(k): str(v) for k, v in env.items()}


def pyproject() -> dict[str, Any]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def dockerfile_instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) in order: continuation lines joined, comments dropped."""
    out: list[tuple[str, str]] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.startswith("#"):  # a comment inside a continued instruction
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        full = (pending + line).strip()
        pending = ""
        word, _, rest = full.partition(" ")
        out.append((word.upper(), rest.strip()))
    return out


def exec_form(args: str) -> list[str]:
    """The argument list of an instruction in exec form (JSON) or shell form."""
    if args.startswith("["):
        value = json.loads(args)
        assert isinstance(value, list)
        return [str(v) for v in value]
    return shlex.split(args)


def image_copies(until: int | None = None) -> list[tuple[str, PurePosixPath]]:
    """(source in the build context, absolute destination in the image) of every COPY, in order
    (of those before instruction number ``until`` when given).

    Docker's rules as far as this Dockerfile needs them: a relative destination is under the
    current WORKDIR; with several sources or a destination ending in '/', each source lands
    inside it under its own name; with one source, the destination is that source's new path."""
    workdir = PurePosixPath("/")
    copies: list[tuple[str, PurePosixPath]] = []
    for i, (instr, args) in enumerate(dockerfile_instructions(DOCKERFILE.read_text(encoding="utf-8"))):
        if until is not None and i >= until:
            break
        if instr == "WORKDIR":
            workdir = workdir / args
        elif instr == "COPY":
            words = [w for w in exec_form(args) if not w.startswith("--")]
            *sources, dest = words
            into_dir = dest.endswith("/") or len(sources) > 1
            target = workdir / dest
            for src in sources:
                copies.append((src.rstrip("/"), target / PurePosixPath(src).name if into_dir else target))
    return copies


def project_install() -> tuple[int, PurePosixPath]:
    """(instruction number, working directory) of the RUN that installs the project itself."""
    workdir = PurePosixPath("/")
    for i, (instr, args) in enumerate(dockerfile_instructions(DOCKERFILE.read_text(encoding="utf-8"))):
        if instr == "WORKDIR":
            workdir = workdir / args
        elif instr == "RUN" and re.search(r"pip install [^&]*-c constraints\.txt \.(\s|$)", args):
            return i, workdir
    raise AssertionError("the Dockerfile has no `pip install -c constraints.txt .`")


def repo_path(container_path: str) -> Path:
    """The file of the repository that the image has at ``container_path`` (via its COPYs)."""
    path = PurePosixPath(container_path)
    for src, dest in reversed(image_copies()):  # the last COPY to a place wins
        if path == dest or dest in path.parents:
            return ROOT / src / path.relative_to(dest)
    raise AssertionError(f"{container_path} is not copied into the image by the Dockerfile")


def parse_cli(argv: list[str]) -> tuple[dict[str, Any], str, dict[str, Any]]:
    """Parse a command line with the real CLI's click objects, without running anything:
    (root options, subcommand name, subcommand options). Raises click's usage errors."""
    group: Any = typer.main.get_command(app)  # a click Group (typer vendors click)
    ctx = group.make_context("replimon", list(argv))
    # click keeps the subcommand's name apart from its arguments (``protected_args`` is
    # deprecated in favour of the private name)
    name, cmd, rest = group.resolve_command(ctx, [*ctx._protected_args, *ctx.args])
    assert name is not None and cmd is not None
    sub = cmd.make_context(name, list(rest), parent=ctx)
    return dict(ctx.params), name, dict(sub.params)


def in_container(argv: list[str]) -> list[str]:
    """``argv`` with the container's --config path replaced by the repository's file."""
    out = list(argv)
    for i, word in enumerate(out[:-1]):
        if word in ("--config", "-c"):
            out[i + 1] = str(repo_path(out[i + 1]))
    return out


# ------------------------------------------------------------------------ schema and linting
def check_compose_schema(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(VENV_BIN / "check-jsonschema"), "--builtin-schema", "vendor.compose-spec", str(path)],
                          capture_output=True, text=True, timeout=120, check=False)


def test_compose_file_validates_against_the_compose_specification(tmp_path: Path) -> None:
    result = check_compose_schema(COMPOSE_FILE)
    assert result.returncode == 0, result.stdout + result.stderr
    # negative control: the same file with a misspelt service key must be refused
    broken = tmp_path / "docker-compose.yml"
    broken.write_text(COMPOSE_FILE.read_text(encoding="utf-8").replace("    depends_on:", "    depend_on:", 1),
                      encoding="utf-8")
    assert check_compose_schema(broken).returncode != 0


def hadolint(path: Path) -> subprocess.CompletedProcess[str]:
    # from the repository root, as documented: hadolint reads ./.hadolint.yaml there
    return subprocess.run([str(VENV_BIN / "hadolint"), "--no-color", str(path)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, check=False)


def test_dockerfile_passes_hadolint(tmp_path: Path) -> None:
    result = hadolint(DOCKERFILE)
    assert result.returncode == 0 and not result.stdout.strip(), result.stdout + result.stderr
    # negative control: an untagged base image is reported (DL3006), so the lint really runs
    bad = tmp_path / "Dockerfile"
    bad.write_text(DOCKERFILE.read_text(encoding="utf-8").replace("FROM python:3.11-slim-bookworm", "FROM python", 1),
                   encoding="utf-8")
    assert "DL3006" in hadolint(bad).stdout


def test_every_rule_hadolint_ignores_says_why() -> None:
    config = yaml.safe_load(HADOLINT_CONFIG.read_text(encoding="utf-8"))
    ignored = config.get("ignored") or []
    lines = HADOLINT_CONFIG.read_text(encoding="utf-8").splitlines()
    for rule in ignored:
        at = next(i for i, line in enumerate(lines) if line.strip() == f"- {rule}")
        comment = []  # the comment block right above the entry
        for line in reversed(lines[:at]):
            if not line.strip().startswith("#"):
                break
            comment.append(line)
        assert any(rule in c for c in comment), f".hadolint.yaml ignores {rule} without a comment naming it and why"


# ------------------------------------------------------------------------------ images, mounts
def test_every_image_is_pinned_to_a_tag() -> None:
    version = pyproject()["project"]["version"]
    for name, svc in services().items():
        image = str(svc.get("image", ""))
        repo, _, tag = image.rpartition(":") if ":" in image else (image, "", "")
        assert repo and tag and tag != "latest", f"service {name}: image {image!r} is not pinned to a tag"
        if "build" in svc:  # our own image: tagged with the project's version
            assert tag == version, f"service {name}: builds {image}, but pyproject.toml's version is {version}"
    base = [args for instr, args in dockerfile_instructions(DOCKERFILE.read_text(encoding="utf-8")) if instr == "FROM"]
    assert base and all(":" in b and not b.split()[0].endswith(":latest") for b in base), base


def test_every_bind_mounted_host_path_exists() -> None:
    mounts = 0
    for name, svc in services().items():
        for volume in svc.get("volumes", []):
            source = volume.split(":")[0] if isinstance(volume, str) else volume.get("source", "")
            if source.startswith((".", "/")):
                mounts += 1
                assert (ROOT / source).exists(), f"service {name} mounts {source}, which is not in the repository"
            else:
                assert source in (compose().get("volumes") or {}), f"service {name}: volume {source!r} is not declared"
    assert mounts >= 2


def _mounts(svc: dict[str, Any]) -> dict[str, tuple[Path, str]]:
    """target -> (host path, mode) of a service's bind mounts."""
    out = {}
    for volume in svc.get("volumes", []):
        source, target, *mode = volume.split(":")
        if source.startswith("."):
            out[target] = ((ROOT / source).resolve(), mode[0] if mode else "rw")
    return out


def test_grafana_mounts_the_provisioning_and_the_dashboards_where_common_says() -> None:
    _, grafana = service_using("grafana/grafana")
    mounts = _mounts(grafana)
    assert mounts.get(common.CONTAINER_PROVISIONING) == (common.PROVISIONING_DIR, "ro")
    assert mounts.get(common.CONTAINER_DASHBOARDS) == (common.JSON_DIR, "ro")
    # Grafana 12.x: the dashboards are its model (dashboards/schema/README.md; docs/docker.md).
    assert grafana["image"].split(":")[1].startswith("12."), "the dashboards need Grafana 12.x"
    assert "3000:3000" in [str(p) for p in grafana.get("ports", [])]
    postgres_name, _ = service_using("postgres")
    assert grafana["depends_on"][postgres_name]["condition"] == "service_healthy"


def test_grafana_home_dashboard_is_the_fleet_dashboard() -> None:
    _, grafana = service_using("grafana/grafana")
    home = PurePosixPath(env_of(grafana)["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"])
    assert str(home.parent) == common.CONTAINER_DASHBOARDS
    path = common.JSON_DIR / home.name
    assert path.is_file(), f"{path} (Grafana's home dashboard) does not exist"
    assert json.loads(path.read_text(encoding="utf-8"))["uid"] == common.DASHBOARD_UIDS["fleet"]


def _provisioning(kind: str) -> list[dict[str, Any]]:
    files = sorted((common.PROVISIONING_DIR / kind).glob("*.yaml"))
    assert files, f"no provisioning file in {common.PROVISIONING_DIR / kind}"
    return [yaml.safe_load(f.read_text(encoding="utf-8")) for f in files]


def test_dashboard_provider_reads_the_mounted_dashboards() -> None:
    providers = [p for doc in _provisioning("dashboards") for p in doc.get("providers", [])]
    assert providers, "no dashboard provider"
    for provider in providers:
        assert provider["options"]["path"] == common.CONTAINER_DASHBOARDS, provider


def _pg_service() -> tuple[str, int, dict[str, str]]:
    """(service name, port inside the compose network, environment) of the postgres service."""
    name, svc = service_using("postgres")
    env = env_of(svc)
    port = int(env.get("PGPORT", 5432))
    published = [str(p).split(":")[-1] for p in svc.get("ports", [])]
    assert str(port) in published, f"postgres listens on {port} but publishes {published}"
    return name, port, env


def test_datasource_points_at_the_compose_postgres() -> None:
    name, port, env = _pg_service()
    sources = [d for doc in _provisioning("datasources") for d in doc.get("datasources", [])]
    ours = [d for d in sources if d.get("uid") == common.DATASOURCE_UID]
    assert len(ours) == 1, f"expected one datasource with uid {common.DATASOURCE_UID}"
    ds = ours[0]
    assert ds["type"] == common.DATASOURCE_TYPE
    assert ds["url"] == f"{name}:{port}" == common.COMPOSE_PG["host"]
    assert ds["user"] == env["POSTGRES_USER"] == common.COMPOSE_PG["user"]
    database = ds.get("jsonData", {}).get("database", ds.get("database"))
    assert database == env["POSTGRES_DB"] == common.COMPOSE_PG["database"]
    assert ds.get("secureJsonData", {}).get("password") == env["POSTGRES_PASSWORD"] == common.COMPOSE_PG["password"]


# ------------------------------------------------------------------------- the job's config
def test_docker_config_uses_sparks_kafka_source_of_the_installed_spark() -> None:
    settings = load_settings(DOCKER_CONF)
    assert settings.streaming.source_format == "kafka"
    package = settings.streaming.spark_conf["spark.jars.packages"]
    match = re.fullmatch(r"org\.apache\.spark:spark-sql-kafka-0-10_(\d+\.\d+):(\S+)", package)
    assert match, f"spark.jars.packages is not Spark's Kafka connector: {package!r}"
    scala, version = match.groups()
    assert version == pyspark.__version__
    pinned = re.search(r"^pyspark==(\S+)$", (ROOT / "constraints.txt").read_text(encoding="utf-8"), re.M)
    assert pinned and pinned.group(1) == version, "constraints.txt pins another pyspark"
    jars = {p.name for p in (Path(pyspark.__file__).parent / "jars").glob("spark-core_*.jar")}
    assert f"spark-core_{scala}-{version}.jar" in jars, f"the installed Spark is built for Scala {jars}, not {scala}"


def test_docker_config_addresses_are_the_compose_services() -> None:
    settings = load_settings(DOCKER_CONF)
    kafka_name, kafka = next((n, s) for n, s in services().items() if "KAFKA_ADVERTISED_LISTENERS" in env_of(s))
    advertised = dict(item.split("://", 1) for item in env_of(kafka)["KAFKA_ADVERTISED_LISTENERS"].split(","))
    in_network = advertised[env_of(kafka)["KAFKA_INTER_BROKER_LISTENER_NAME"]]  # the compose network's listener
    assert settings.kafka.bootstrap_servers == in_network
    assert in_network.split(":")[0] in (kafka_name, kafka.get("hostname"))
    name, port, env = _pg_service()
    expected = f"postgresql://{env['POSTGRES_USER']}:{env['POSTGRES_PASSWORD']}@{name}:{port}/{env['POSTGRES_DB']}"
    assert settings.postgres.dsn == expected


def test_environment_overrides_the_docker_config(monkeypatch: pytest.MonkeyPatch) -> None:
    # docs/docker.md's recipe for your own Kafka and PostgreSQL
    monkeypatch.setenv("REPLIMON_KAFKA__BOOTSTRAP_SERVERS", "broker.example:9092")
    monkeypatch.setenv("REPLIMON_POSTGRES__DSN", "postgresql://u:p@db.example:5432/mon")
    settings = load_settings(DOCKER_CONF)
    assert settings.kafka.bootstrap_servers == "broker.example:9092"
    assert settings.postgres.dsn == "postgresql://u:p@db.example:5432/mon"
    assert settings.streaming.source_format == "kafka"  # the rest still comes from the file


def test_kafka_topics_creates_exactly_the_configured_topics() -> None:
    topics = load_settings(DOCKER_CONF).kafka
    script = services()["kafka-topics"]["command"]
    script = "\n".join(script) if isinstance(script, list) else str(script)
    created: dict[str, str] = {}
    for line in script.splitlines():
        loop = re.match(r"\s*for (\w+) in (.+?); do", line)
        if loop:
            loop_names = loop.group(2).split()
            continue
        if "--create" not in line:
            continue
        words = shlex.split(line.replace("$$", "$"))
        topic = words[words.index("--topic") + 1]
        assert int(words[words.index("--partitions") + 1]) == topics.partitions
        assert int(words[words.index("--replication-factor") + 1]) == topics.replication_factor
        for name in loop_names if topic.startswith("$") else [topic]:
            assert name not in created, f"{name} created twice"
            created[name] = line
    assert sorted(created) == sorted(topics.topics.all)
    assert "cleanup.policy=compact" in created[topics.topics.state]
    assert all("cleanup.policy" not in line for name, line in created.items() if name != topics.topics.state)


# ------------------------------------------------------------------------------- the image
def test_image_holds_every_package_and_the_config() -> None:
    copied = {src for src, _ in image_copies()}
    folders = set(setup_py().ROOTS.values())
    missing = folders - copied
    assert not missing, f"the package folders {sorted(missing)} are not copied into the image"
    assert {"pyproject.toml", "setup.py", "constraints.txt", pyproject()["project"]["readme"], "conf"} <= copied
    for src in copied:
        assert (ROOT / src).exists(), f"the Dockerfile copies {src}, which does not exist"
    assert repo_path("/app/conf/docker.yaml") == DOCKER_CONF


def test_the_image_installs_the_wheel_the_tree_builds(tmp_path: Path) -> None:
    """What the Dockerfile has copied when it installs the project (its build context through
    .dockerignore) builds the same wheel as the tree: the wheel tests/test_wheel.py runs."""
    index, workdir = project_install()
    ignore = [line.strip() for line in DOCKERIGNORE.read_text(encoding="utf-8").splitlines()
              if line.strip() and not line.startswith("#")]
    tracked = tracked_files()
    context = tmp_path / "image"
    copied = 0
    for src, dest in image_copies(until=index):
        if dest != workdir and workdir not in dest.parents:
            continue
        for f in tracked:
            if (f == src or f.startswith(src + "/")) and not _ignored(ignore, f):
                target = context / dest.relative_to(workdir) / PurePosixPath(f).relative_to(src)
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes((ROOT / f).read_bytes())
                copied += 1
    assert copied > 150
    image = wheel_names(build_wheel(context, tmp_path / "dist"))
    assert image == wheel_names(wheel_of_tree(tmp_path)), sorted(image ^ wheel_names(wheel_of_tree(tmp_path / "again")))
    # the dependencies the image installs first are the project's runtime list, which is all the
    # wheel test's environment has (it refuses the dev extra's packages)
    deps_run = " ".join(args for i, (instr, args) in enumerate(dockerfile_instructions(DOCKERFILE.read_text(encoding="utf-8")))
                        if instr == "RUN" and i < index)
    assert "['project']['dependencies']" in deps_run and "-r requirements.txt" in deps_run


def test_dockerfile_installs_the_project_as_the_compose_file_expects() -> None:
    instructions = dockerfile_instructions(DOCKERFILE.read_text(encoding="utf-8"))
    runs = " ".join(args for instr, args in instructions if instr == "RUN")
    assert re.search(r"pip install --no-cache-dir -c constraints\.txt \.(\s|$)", runs), "not `pip install -c constraints.txt .`"
    assert "[dev]" not in runs
    assert "openjdk-17-jre-headless" in runs
    entry = [exec_form(args) for instr, args in instructions if instr == "ENTRYPOINT"]
    assert entry[-1] == ["replimon"] and "replimon" in pyproject()["project"]["scripts"]
    env = " ".join(args for instr, args in instructions if instr == "ENV")
    assert "PYSPARK_PYTHON=" in env
    users = [args for instr, args in instructions if instr == "USER"]
    assert users and users[-1].split(":")[0] not in ("root", "0"), "the image must not run as root"
    # the writable places conf/docker.yaml names are created (and owned) in the image
    settings = load_settings(DOCKER_CONF)
    for path in (settings.paths.data_dir, settings.paths.checkpoint_dir, settings.streaming.spark_conf["spark.jars.ivy"]):
        assert str(path) in runs, f"the Dockerfile does not create {path}"


def _ignored(patterns: list[str], path: str) -> bool:
    """Docker's .dockerignore semantics: patterns anchored at the context root, `**` any number
    of directories, `!` re-includes, the last match wins, a path is excluded with its parent."""
    def regex(pattern: str) -> re.Pattern[str]:
        out, i = "", 0
        while i < len(pattern):
            if pattern.startswith("**/", i):
                out, i = out + "(.*/)?", i + 3
            elif pattern.startswith("**", i):
                out, i = out + ".*", i + 2
            elif pattern[i] == "*":
                out, i = out + "[^/]*", i + 1
            elif pattern[i] == "?":
                out, i = out + "[^/]", i + 1
            elif pattern[i] == "[" and "]" in pattern[i + 1:]:  # a character class, as in Go's
                end = pattern.index("]", i + 1)
                body = pattern[i + 1:end]
                out, i = out + "[" + ("^" + body[1:] if body.startswith("^") else body) + "]", end + 1
            else:
                out, i = out + re.escape(pattern[i]), i + 1
        return re.compile(out + "$")

    parts = path.split("/")
    candidates = ["/".join(parts[: n + 1]) for n in range(len(parts))]
    excluded = False
    for pattern in patterns:
        negate = pattern.startswith("!")
        rx = regex(pattern.lstrip("!").strip("/"))
        if any(rx.match(c) for c in candidates):
            excluded = not negate
    return excluded


def test_dockerignore_keeps_the_build_context_small_but_complete() -> None:
    patterns = [line.strip() for line in DOCKERIGNORE.read_text(encoding="utf-8").splitlines()
                if line.strip() and not line.startswith("#")]
    for heavy in (".venv/bin/python", "var/data/x", "build/lib/x.py", ".git/HEAD",
                  "replimon/__pycache__/cli.cpython-311.pyc", ".pytest_cache/v", ".mypy_cache/x", "replimon.egg-info/PKG-INFO"):
        assert _ignored(patterns, heavy), f".dockerignore lets {heavy} into the build context"
    tracked = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True,
                             text=True, check=True).stdout.split()
    copied = [src for src, _ in image_copies()]
    needed = [f for f in tracked if any(f == src or f.startswith(src + "/") for src in copied)]
    assert len(needed) > 50
    dropped = [f for f in needed if _ignored(patterns, f)]
    assert not dropped, f".dockerignore drops files the image needs: {dropped[:10]}"


# ------------------------------------------------------------------------- the command lines
def test_the_jobs_command_parses_and_runs_the_live_job() -> None:
    job = services()["replimon-job"]
    root, name, params = parse_cli(in_container(job["command"]))
    assert name == "run"
    assert Path(root["config"]) == DOCKER_CONF
    assert params["replay"] is False and params["run_id"] == "live"
    assert repo_path(env_of(job)["REPLIMON_CONFIG"]) == DOCKER_CONF  # what its healthcheck loads
    assert job["depends_on"]["kafka-topics"]["condition"] == "service_completed_successfully"
    assert job["depends_on"][_pg_service()[0]]["condition"] == "service_healthy"
    # the checkpoint lives on a named volume
    settings = load_settings(DOCKER_CONF)
    targets = [v.split(":")[1] for v in job["volumes"] if not v.startswith((".", "/"))]
    assert any(PurePosixPath(settings.paths.checkpoint_dir) == PurePosixPath(t) for t in targets), targets


def simulator_argv() -> list[str]:
    return in_container(services()["simulator"]["command"])


def test_the_simulators_command_parses_and_publishes_forever() -> None:
    root, name, params = parse_cli(simulator_argv())
    assert name == "simulate" and Path(root["config"]) == DOCKER_CONF
    assert params["kafka"] is True and params["out"] is None
    assert params["duration"] == "0"
    assert params["inject"], "the demo injects faults"
    for text in params["inject"]:
        injection = parse_injection(text)  # the real parser: unknown faults raise
        assert injection.at_ms > 0, f"{text}: give every fault a time, so the fleet has a healthy start"
        assert int(injection.group.removeprefix("g")) <= params["groups"], f"{text}: no such group"


def test_the_simulators_faults_raise_exactly_their_alerts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The demo as Grafana will show it: the compose simulator's own arguments, run offline into a
    file for as long as its last fault needs, then ``replimon check``: every injected fault raises
    its alert in its group, and no other group has a warning or critical alert."""
    argv = simulator_argv()
    _, _, params = parse_cli(argv)
    injections = [parse_injection(t) for t in params["inject"]]
    expected = {(i.group, CATALOGUE[i.fault].alert) for i in injections}
    until_s = max(i.at_ms for i in injections) // 1000 + 60
    offline = [w for w in argv if w != "--kafka"]
    offline[offline.index("--duration") + 1] = f"{until_s}s"
    trace = tmp_path / "demo.jsonl"
    assert main([*offline, "--out", str(trace)]) == 0
    capsys.readouterr()
    assert main(["--config", str(DOCKER_CONF), "check", str(trace), "--fail-on", "never", "--min-severity", "warning"]) == 0
    alerts = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    raised = {(a["group"], a["kind"]) for a in alerts if a["status"] == "firing"}
    assert raised == expected


# ----------------------------------------------------------------------- the job's healthcheck
@pytest.mark.postgres
def test_the_jobs_healthcheck_follows_its_micro_batches(empty_database: str) -> None:
    job = services()["replimon-job"]
    test = job["healthcheck"]["test"]
    assert test[0] == "CMD" and test[1] == "python"
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("REPLIMON_")}
    env.update({k: str(repo_path(v)) if k == "REPLIMON_CONFIG" else v for k, v in env_of(job).items()})
    env["REPLIMON_POSTGRES__DSN"] = empty_database  # the one thing that differs from the container

    def healthy() -> bool:
        result = subprocess.run([sys.executable, *test[2:]], env=env, capture_output=True, text=True,
                                timeout=60, check=False)
        assert result.returncode in (0, 1), result.stderr
        return result.returncode == 0

    def metrics(run_id: str, batch: int, age: str) -> None:
        with psycopg.connect(empty_database, autocommit=True) as conn:
            conn.execute("INSERT INTO pipeline_metrics (run_id, batch_id, ts) VALUES (%s, %s, now() - %s::interval)",
                         (run_id, batch, age))

    assert not healthy()  # no micro-batch yet
    metrics("replay-1", 0, "1 second")
    assert not healthy()  # another run's batches say nothing about the live job
    metrics("live", 0, "5 minutes")
    assert not healthy()  # stale
    metrics("live", 1, "2 seconds")
    assert healthy()


def test_the_docs_name_every_service() -> None:
    text = (ROOT / "docs" / "docker.md").read_text(encoding="utf-8")
    assert "docker compose up --build" in text
    missing = [name for name in services() if f"`{name}`" not in text]
    assert not missing, f"docs/docker.md does not describe the services {missing}"
