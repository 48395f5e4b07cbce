"""Running the suites with Great Expectations 1.x over pandas frames.

`validate` runs every suite that has a frame and returns one `Outcome` per expectation: what
``dq_results`` stores and what a DATA_QUALITY_FAILED alert names. It uses one ephemeral GX
context per process (in-memory stores, no data-docs site, no progress bars), built on first use
with every suite of ``replimon.quality.suites``: importing GX takes seconds (about 6 s on the
development machine), creating the context a quarter of one, a validation tens of ms.
`build_docs` runs the same suites through a GX Checkpoint whose UpdateDataDocsAction writes the
data docs into a folder of the caller's choice (``replimon validate --docs``).

The GX import is deferred to the first call (``warm_up`` starts it in a background thread, so
the streaming job's first validated batch does not wait for it).
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from replimon.quality.derive import evidence
from replimon.quality.suites import SUITES, spec_of, to_gx

log = logging.getLogger("replimon.quality")

DATASOURCE = "replimon"
# Failing rows GX reports per expectation (the partial unexpected list); the sample kept is the
# first ``quality.sample_rows`` of them.
MAX_SAMPLE = 100


@dataclass
class Outcome:
    """One expectation's result on one frame (one ``dq_results`` row)."""

    suite: str
    expectation: str  # Spec.name: the type with its columns
    success: bool
    evaluated: int | None  # rows evaluated
    unexpected: int | None  # rows that failed it
    details: dict[str, Any] = field(default_factory=dict)  # kwargs, observed value, sample rows
    samples: list[dict[str, Any]] = field(default_factory=list)  # the failing rows (evidence)
    error: str | None = None  # the expectation raised (a bug, not the data's fault)


def _context(project_config: Any = None) -> Any:
    """An ephemeral context without temporary data-docs sites or progress bars."""
    import great_expectations as gx
    from great_expectations.data_context.types.base import (
        DataContextConfig,
        InMemoryStoreBackendDefaults,
        ProgressBarsConfig,
    )

    config = project_config or DataContextConfig(
        store_backend_defaults=InMemoryStoreBackendDefaults(init_temp_docs_sites=False),
        analytics_enabled=False, progress_bars=ProgressBarsConfig(globally=False))
    return gx.get_context(mode="ephemeral", project_config=config)


class _Runner:
    """An ephemeral context with a pandas datasource, one dataframe asset and whole-frame batch
    definition per suite, and every suite registered."""

    def __init__(self) -> None:
        self.context = _context()
        source = self.context.data_sources.add_pandas(DATASOURCE)
        self.batches: dict[str, Any] = {}
        self.suites: dict[str, Any] = {}
        for name in SUITES:
            self.batches[name] = (source.add_dataframe_asset(name)
                                  .add_batch_definition_whole_dataframe("batch"))
            self.suites[name] = self.context.suites.add(to_gx(name))

    def run(self, name: str, frame: pd.DataFrame, params: Mapping[str, Any]) -> Any:
        batch = self.batches[name].get_batch(batch_parameters={"dataframe": frame})
        return batch.validate(self.suites[name], expectation_parameters=dict(params),
                              result_format=_RESULT_FORMAT)


_RESULT_FORMAT = {"result_format": "SUMMARY", "partial_unexpected_count": MAX_SAMPLE}
_runner: _Runner | None = None
_lock = threading.Lock()


def warm_up() -> threading.Thread:
    """Import Great Expectations in a background thread (a later import waits for it)."""
    def load() -> None:
        try:
            import great_expectations  # noqa: F401
        except Exception as exc:  # pragma: no cover - reported again by the first validation
            log.warning("could not import Great Expectations: %s", exc)

    thread = threading.Thread(target=load, name="replimon-gx-import", daemon=True)
    thread.start()
    return thread


def _get_runner() -> _Runner:
    global _runner
    if _runner is None:
        _runner = _Runner()
    return _runner


def validate(frames: Mapping[str, pd.DataFrame], params: Mapping[str, Any], *,
             sample_rows: int = 5) -> list[Outcome]:
    """Every expectation of every suite that has a non-empty frame, in suite order."""
    outcomes: list[Outcome] = []
    with _lock:  # one context per process; GX contexts are not meant to be shared by threads
        runner = _get_runner()
        for name in SUITES:
            frame = frames.get(name)
            if frame is None or frame.empty:
                continue
            result = runner.run(name, frame, params)
            outcomes.extend(outcomes_of(name, frame, result, sample_rows))
    return outcomes


def _json_safe(value: Any) -> Any:
    """Observed values and kwargs as JSON (numpy scalars, tuples, NaN)."""
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set):
        return [_json_safe(v) for v in value]
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and value != value:
        return None
    return value


def outcomes_of(name: str, frame: pd.DataFrame, result: Any, sample_rows: int) -> list[Outcome]:
    """GX's suite result as Outcomes, with the failing rows looked up in ``frame``."""
    out = []
    for r in result.results:
        spec = spec_of(name, r.expectation_config.type, r.expectation_config.kwargs)
        res = r.result or {}
        info = r.exception_info or {}
        error = info.get("exception_message") if info.get("raised_exception") else None
        kwargs = {k: v for k, v in r.expectation_config.kwargs.items() if k != "batch_id"}
        details: dict[str, Any] = {"kwargs": _json_safe(kwargs)}
        for key in ("observed_value", "unexpected_percent", "missing_count"):
            if key in res:
                details[key] = _json_safe(res[key])
        samples: list[dict[str, Any]] = []
        for index in (res.get("partial_unexpected_index_list") or [])[:sample_rows]:
            if index in frame.index:
                samples.append(evidence(name, frame.loc[index].to_dict(), spec.columns))
        if samples:
            details["sample"] = samples
        if error:
            details["error"] = _one_line(error)
            log.warning("data quality: %s %s raised: %s", name, spec.name, details["error"])
        out.append(Outcome(name, spec.name, bool(r.success) and not error,
                           res.get("element_count", len(frame)), res.get("unexpected_count"),
                           details, samples, details.get("error")))
    return out


def _one_line(text: str) -> str:
    return re.sub(r"\s+", " ", str(text)).strip()[:500]


# -- data docs -------------------------------------------------------------------------------------
# GX's page templates fetch their logo from GX's servers with the data context id appended (and
# its dark-mode style sheet another one): the pages use the copies the builder writes into
# static/images instead, so opening them tells nobody anything.
_ASSETS = "https://great-expectations-web-assets.s3.us-east-2.amazonaws.com/"
_REMOTE_LOGO = re.compile(r'src="' + re.escape(_ASSETS) + r'logo-long\.png[^"]*"')
_REMOTE_CSS_LOGO = re.compile(r"url\('" + re.escape(_ASSETS) + r"[^']*'\)")
# Some templates (the favicon's) count folders without the suite name's dots: every link into
# static/ gets the page's real depth.
_LOCAL_STATIC = re.compile(r'\b(src|href)="(?:\./|(?:\.\./)+)?static/')


def build_docs(frames: Mapping[str, pd.DataFrame], params: Mapping[str, Any], folder: Path,
               run_name: str) -> Path:
    """Validate ``frames`` through a GX Checkpoint whose UpdateDataDocsAction writes GX's data
    docs (an index, one page per suite, one per validation result) into ``folder``; returns the
    index page. The pages link to each other and to ``folder/static`` only (besides the CSS and
    scripts GX's templates load from public CDNs)."""
    import great_expectations as gx

    folder = folder.resolve()
    folder.mkdir(parents=True, exist_ok=True)
    with _lock:
        context = _context()
        source = context.data_sources.add_pandas(DATASOURCE)
        definitions = []
        for name in SUITES:
            frame = frames.get(name)
            if frame is None or frame.empty:
                continue
            batch = source.add_dataframe_asset(name).add_batch_definition_whole_dataframe("batch")
            suite = context.suites.add(to_gx(name))
            definitions.append((context.validation_definitions.add(
                gx.ValidationDefinition(name=name, data=batch, suite=suite)), frame))
        context.add_data_docs_site(site_name="replimon", site_config={
            "class_name": "SiteBuilder", "show_how_to_buttons": False,
            "store_backend": {"class_name": "TupleFilesystemStoreBackend",
                              "base_directory": str(folder)},
            "site_index_builder": {"class_name": "DefaultSiteIndexBuilder"}})
        action = gx.checkpoint.UpdateDataDocsAction(name="data_docs", site_names=["replimon"])
        # One checkpoint run per suite: each validation definition takes its own frame.
        for definition, frame in definitions:
            checkpoint = context.checkpoints.add(gx.Checkpoint(
                name=f"replimon-{definition.name}", validation_definitions=[definition],
                actions=[action], result_format={"result_format": "SUMMARY"}))
            checkpoint.run(batch_parameters={"dataframe": frame}, expectation_parameters=dict(params),
                           run_id=_run_id(run_name))
        context.build_data_docs(site_names=["replimon"])
    for page in folder.rglob("*.html"):
        depth = len(page.relative_to(folder).parts) - 1
        _rewrite(page, "../" * depth + "static/")
    for sheet in (folder / "static").rglob("*.css"):
        _rewrite(sheet, "../")
    return folder / "index.html"


def _rewrite(path: Path, static: str) -> None:
    """Point a page's (or style sheet's) links into static/ and GX's remote logo at the folder's
    own static/ (``static``: its path relative to the file)."""
    text = path.read_text(encoding="utf-8")
    logo = f"{static}images/logo-long.png"
    new = _REMOTE_LOGO.sub(f'src="{logo}"', text)
    new = _REMOTE_CSS_LOGO.sub(f"url('{logo}')", new)
    new = _LOCAL_STATIC.sub(lambda m: f'{m.group(1)}="{static}', new)
    if new != text:
        path.write_text(new, encoding="utf-8")


def _run_id(name: str) -> Any:
    from great_expectations.core.run_identifier import RunIdentifier

    return RunIdentifier(run_name=name)
