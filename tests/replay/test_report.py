"""``replimon.replay.report.write_report`` (docs/report.md) on the end-to-end run's tables.

The HTML report is checked as a reader would meet it:

* in Debian's headless Chromium (``apt-get install -y chromium``), driven over the DevTools
  protocol on a pipe (``--remote-debugging-pipe``: NUL-separated JSON on file descriptors 3 and
  4, so no websocket client is needed): the page loads with no console message and no exception,
  clicking an alert marker opens that alert's evidence, and a screenshot of the first timeline
  has the window's size and shows a chart (many colours, the critical marker's red, ink);
* statically: nothing to fetch from the network, a timeline section for every affected group
  with a marker and the evidence of each of its warning/critical alerts, the counts by kind equal
  to ``count(DISTINCT alert_id)`` in the alerts table, in the HTML and in the Markdown;
* on a copy of the run with a hostile group name and message, a replay_runs row and data-quality
  rows: everything from the data is escaped, the reproduce section shows the replay's command
  and offsets, and the data-quality results are listed.
"""

from __future__ import annotations

import base64
import fcntl
import html
import json
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import threading
import time
import uuid
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import psycopg
import pytest

from replimon.core.limits import Limits
from replimon.replay.report import ReportSummary, write_report
from replimon.replay.report_data import load_run
from replimon.replay.report_events import EventSource
from replimon.replay.report_md import md_cell
from tests.support import copy_run, delete_run

pytestmark = [pytest.mark.broker, pytest.mark.postgres, pytest.mark.timeout(900)]

CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                  "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync")
WIDTH, HEIGHT = 1280, 900
CRITICAL_RGB = (0xC6, 0x28, 0x28)  # report_svg.SEV_COLOR["critical"], the alert triangles
HOSTILE = "g3<img src=x onerror=\"console.error('escaped?')\">|&amp;`"


# -- the report of the e2e run ---------------------------------------------------------------------
@dataclass
class Written:
    summary: ReportSummary
    html_path: Path
    html: str
    md: str


@pytest.fixture(scope="module")
def written(e2e: Any, tmp_path_factory: pytest.TempPathFactory) -> Written:
    out = tmp_path_factory.mktemp("report")
    html_path, md_path = out / "report.html", out / "report.md"
    # every affected group of the e2e run drawn: its XCom, generations, quorum-log and chain
    # fleets have more affected groups than the default cap (test_timelines_are_capped_with_a_note)
    summary = write_report(e2e.settings.postgres.dsn, e2e.run_id, html_path, md_path, max_timelines=100,
                           events=EventSource.from_settings(e2e.settings))
    return Written(summary, html_path, html_path.read_text(encoding="utf-8"),
                   md_path.read_text(encoding="utf-8"))


@dataclass
class Facts:
    """What the tables say about the run, by SQL of its own."""

    kinds: dict[str, int]  # kind -> distinct alert ids
    notable: dict[str, set[str]]  # affected group -> its warning/critical alert ids
    groups: int


def facts(dsn: str, run: str) -> Facts:
    with psycopg.connect(dsn) as conn:
        kinds = dict(conn.execute("SELECT kind, count(DISTINCT alert_id) FROM alerts"
                                  " WHERE run_id = %s GROUP BY kind", (run,)).fetchall())
        notable: dict[str, set[str]] = {}
        for group, alert in conn.execute(
                "SELECT DISTINCT group_id, alert_id FROM alerts WHERE run_id = %s"
                " AND severity IN ('critical', 'warning')", (run,)):
            notable.setdefault(group, set()).add(alert)
        (groups,) = conn.execute("SELECT count(*) FROM group_state WHERE run_id = %s",
                                 (run,)).fetchone() or (0,)
    return Facts(kinds, notable, groups)


@dataclass
class Section:
    """One ``section.group`` of the page: its group, timeline, markers and evidence blocks."""

    group: str
    svgs: int = 0
    markers: set[str] = field(default_factory=set)
    evidence: set[str] = field(default_factory=set)
    text: list[str] = field(default_factory=list)


class Page(HTMLParser):
    """The parts of the report the tests look at."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.sections: list[Section] = []
        self.depth = 0
        self.section_depth: int | None = None
        self.urls: list[str] = []  # every src/href value
        self.tables: dict[str, list[list[str]]] = {}  # table class -> rows of cell text
        self._table: str | None = None
        self._row: list[str] | None = None
        self._cell: list[str] | None = None
        self.feed(text)
        self.close()

    VOID = frozenset({"meta", "link", "br", "img", "input", "hr", "col", "source", "path",
                      "circle", "line", "rect", "polyline"})

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        self.urls += [v for k, v in a.items() if k in ("src", "href")]
        classes = a.get("class", "").split()
        if tag == "section" and "group" in classes:
            self.sections.append(Section(a.get("data-group", "")))
            self.section_depth = self.depth
        elif self.section_depth is not None:
            sec = self.sections[-1]
            if tag == "svg" and "timeline" in classes:
                sec.svgs += 1
            if "mk" in classes and "data-alert" in a:
                sec.markers.add(a["data-alert"])
            if tag == "details" and "ev" in classes:
                sec.evidence.add(a.get("data-alert", ""))
        if tag == "table":
            self._table = a.get("class", "")
            self.tables.setdefault(self._table, [])
        elif tag == "tr" and self._table is not None:
            self._row = []
        elif tag in ("td", "th") and self._row is not None:
            self._cell = []
        if tag not in self.VOID:
            self.depth += 1

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)
        if tag not in self.VOID:
            self.depth -= 1

    def handle_endtag(self, tag: str) -> None:
        if tag in self.VOID:
            return
        self.depth -= 1
        if tag == "section" and self.section_depth is not None and self.depth == self.section_depth:
            self.section_depth = None
        if tag in ("td", "th") and self._cell is not None and self._row is not None:
            self._row.append("".join(self._cell).strip())
            self._cell = None
        elif tag == "tr" and self._row is not None and self._table is not None:
            self.tables[self._table].append(self._row)
            self._row = None
        elif tag == "table":
            self._table = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)
        if self.section_depth is not None and self.sections:
            self.sections[-1].text.append(data)


def md_table(md: str, heading: str) -> list[list[str]]:
    """The rows (header excluded) of the first table after ``## heading``."""
    lines = md.split("\n## " + heading, 1)[1].split("\n## ", 1)[0].splitlines()
    rows = [line for line in lines if line.startswith("|")]
    return [[c.strip() for c in re.split(r"(?<!\\)\|", r)[1:-1]] for r in rows[2:]]


def test_html_needs_no_network(written: Written) -> None:
    page = Page(written.html)
    assert "http://" not in written.html and "https://" not in written.html
    assert all(u.startswith(("#", "data:")) for u in page.urls), page.urls
    for pattern in (r"<script[^>]+src", r"@import", r"url\(", r"<iframe", r"<img", r"<object",
                    r"<embed", r"\bfetch\(", r"XMLHttpRequest", r"@font-face"):
        assert not re.search(pattern, written.html, re.I), pattern


def test_every_affected_group_has_a_timeline_with_its_alerts(e2e: Any, written: Written) -> None:
    f = facts(e2e.settings.postgres.dsn, e2e.run_id)
    page = Page(written.html)
    sections = {s.group: s for s in page.sections}
    assert len(sections) == len(page.sections)  # one section per group
    assert set(sections) == set(f.notable)  # the affected groups, and only those
    assert len(f.notable) >= 15  # the e2e run: a group per fault of the catalogue
    for group, ids in f.notable.items():
        s = sections[group]
        assert s.svgs == 1, group
        assert ids <= s.markers, (group, ids - s.markers)  # a marker per alert in its timeline
        assert ids <= s.evidence, (group, ids - s.evidence)  # ... and its evidence block
        text = "".join(s.text)
        assert all(i in text for i in ids)  # the alert id is printed
    # ... and every warning/critical alert is listed with its id in the latency table too
    listed = {row[0] for row in page.tables["alerts"][1:]}
    assert listed == set().union(*f.notable.values())
    assert written.summary.affected == len(f.notable) == written.summary.timelines


def test_counts_by_kind_are_the_tables_counts(e2e: Any, written: Written) -> None:
    f = facts(e2e.settings.postgres.dsn, e2e.run_id)
    page = Page(written.html)
    in_html = {row[0]: int(row[3].replace(",", "")) for row in page.tables["kinds"][1:]}
    in_md = {row[0]: int(row[3]) for row in md_table(written.md, "Alerts by kind")}
    assert in_html == in_md == written.summary.by_kind == f.kinds
    assert written.summary.alerts == sum(f.kinds.values())
    assert written.summary.groups == f.groups == len(e2e.group_states)
    md_groups = {row[0] for row in md_table(written.md, "Affected groups")}
    assert md_groups == set(f.notable)


def test_markdown_summary(e2e: Any, written: Written) -> None:
    md = written.md
    assert md.startswith(f"# replimon run `{e2e.run_id}`")
    # The job's data-quality sink validated the run's batches (docs/quality.md): all passed.
    dq_rows = md_table(md, "Data quality")
    assert dq_rows and all(r[3] == "0" for r in dq_rows), dq_rows
    with psycopg.connect(e2e.settings.postgres.dsn) as conn:
        lo, hi = conn.execute("SELECT min(event_ts), max(event_ts) FROM alerts WHERE run_id = %s",
                              (e2e.run_id,)).fetchone() or (None, None)
    assert lo is not None and hi is not None
    # No replay_runs row: the command covering the run's event-time span, whole minutes.
    cmd = re.search(r"```sh\n(replimon replay --from (\S+) --to (\S+))\n```", md)
    assert cmd is not None, md
    start = lo.replace(second=0, microsecond=0)
    assert cmd.group(2) == start.strftime("%Y-%m-%dT%H:%M:00.000Z")
    assert cmd.group(3) > hi.strftime("%Y-%m-%dT%H:%M:%S")
    assert "Detection latency" in md and "wall clock" not in md  # not the live run


def test_unknown_run_raises(e2e: Any, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"^no run 'nope' in PostgreSQL \(known: .*"
                       + re.escape(e2e.run_id)):
        write_report(e2e.settings.postgres.dsn, "nope", tmp_path / "r.html", tmp_path / "r.md")
    assert not (tmp_path / "r.html").exists()


def test_timelines_are_capped_with_a_note(e2e: Any, tmp_path: Path) -> None:
    summary = write_report(e2e.settings.postgres.dsn, e2e.run_id, tmp_path / "r.html", None,
                           max_timelines=3)
    page = Page((tmp_path / "r.html").read_text(encoding="utf-8"))
    assert summary.timelines == len(page.sections) == 3
    assert summary.md_path is None and not (tmp_path / "r.md").exists()
    left = summary.affected - 3
    assert f"{left} groups are listed here without one" in (tmp_path / "r.html").read_text()
    assert len(page.tables["affected"]) - 1 == summary.affected  # the summary keeps them all


def test_timelines_plot_the_events(e2e: Any, written: Written) -> None:
    """Frontier and heartbeat lines come from the run's events read back from Kafka: a few
    hundred points per group where the tables hold a snapshot per micro-batch, and the
    group_silent fault's silence is a rising heartbeat age past the threshold."""
    data = load_run(e2e.settings.postgres.dsn, e2e.run_id,
                    events=EventSource.from_settings(e2e.settings))
    assert data.series_note is not None and "records of" in data.series_note, data.series_note
    silent = next(g for g, m in e2e.manifest.items() if m["fault"] == "group_silent")
    lim = Limits.from_settings(e2e.settings)
    for t in data.timelines:
        assert len(t.series_points) >= 100, (t.group, len(t.series_points))
        assert len(t.series_points) > 10 * max(1, len(t.points)), t.group
        assert set(t.series_nodes) >= set(t.nodes), t.group
        executed = [p["executed"] for rows in t.series_nodes.values() for p in rows
                    if p["executed"] is not None]
        if e2e.group_states[t.group].get("family", "xcom") == "xcom":  # generations: no frontier
            assert len(set(executed)) > 20, t.group  # the frontiers move between the snapshots
        if t.group == silent:
            ages = [p["heartbeat_age_ms"] for rows in t.series_nodes.values() for p in rows
                    if p["heartbeat_age_ms"] is not None]
            assert max(ages) >= lim.group_silent_ms
    page = Page(written.html)
    assert written.html.count('class="series"') >= 2 * 3 * len(page.sections)  # 2 lines a node
    assert "computed from the run's events" in written.html


def test_events_out_of_reach_leave_the_snapshots(e2e: Any, tmp_path: Path) -> None:
    topics = EventSource.from_settings(e2e.settings).topics
    write_report(e2e.settings.postgres.dsn, e2e.run_id, tmp_path / "r.html", None,
                 max_timelines=2, events=EventSource("127.0.0.1:1", topics, timeout_s=2))
    text = (tmp_path / "r.html").read_text(encoding="utf-8")
    assert "no series from the events: the run&#x27;s events could not be read from 127.0.0.1:1" in text
    assert 'class="series"' not in text and 'class="snapshots"' in text


# -- Chromium ----------------------------------------------------------------------------------------
def _high(fd: int) -> int:
    """``fd`` moved to a descriptor number >= 10 (close-on-exec, as os.pipe's)."""
    high = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
    os.close(fd)
    return high


class Chromium:
    """Headless Chromium driven over the DevTools protocol on a pipe."""

    def __init__(self, profile: Path, log: Path) -> None:
        exe = shutil.which("chromium")
        assert exe, "Debian's chromium is needed: apt-get install -y chromium"
        # The child's ends are moved to fds >= 10 first, so the shell's redirections below never
        # overwrite one of them with the other.
        to_browser, self._out = (_high(fd) for fd in os.pipe())
        self._in, from_browser = (_high(fd) for fd in os.pipe())
        argv = [exe, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "--remote-debugging-pipe",
                f"--window-size={WIDTH},{HEIGHT}", "about:blank"]
        # The protocol is on the child's fds 3 and 4: a small Python puts the pipe ends there and
        # execs the browser (dash, /bin/sh here, cannot redirect descriptors above 9).
        place = ("import os, sys; os.dup2(int(sys.argv[1]), 3); os.dup2(int(sys.argv[2]), 4); "
                 "os.closerange(5, 64); os.execv(sys.argv[3], sys.argv[3:])")
        self._log = log.open("wb")
        self.proc = subprocess.Popen([sys.executable, "-c", place, str(to_browser),
                                      str(from_browser), *argv], stdin=subprocess.DEVNULL,
                                     stdout=self._log, stderr=subprocess.STDOUT,
                                     pass_fds=(to_browser, from_browser), start_new_session=True)
        os.close(to_browser)
        os.close(from_browser)
        self.messages: list[dict[str, Any]] = []
        self._cond = threading.Condition()
        self._next = 0
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        buf = b""
        while chunk := os.read(self._in, 1 << 16):
            buf += chunk
            *done, buf = buf.split(b"\0")
            with self._cond:
                self.messages += [json.loads(m) for m in done if m]
                self._cond.notify_all()

    def wait(self, match: Callable[[dict[str, Any]], bool], timeout: float = 30) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                found = next((m for m in self.messages if match(m)), None)
                if found is not None:
                    return found
                left = deadline - time.monotonic()
                assert left > 0 and self.proc.poll() is None, "no answer from chromium"
                self._cond.wait(left)

    def post(self, method: str, params: dict[str, Any] | None = None,
             session: str | None = None) -> int:
        self._next += 1
        msg: dict[str, Any] = {"id": self._next, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self._out, json.dumps(msg).encode() + b"\0")
        return self._next

    def send(self, method: str, params: dict[str, Any] | None = None,
             session: str | None = None) -> dict[str, Any]:
        ident = self.post(method, params, session)
        reply = self.wait(lambda m: m.get("id") == ident)
        assert "error" not in reply, (method, reply["error"])
        return reply["result"]  # type: ignore[no-any-return]

    def close(self) -> None:
        """Ask the browser to quit; kill its process group (this test started it in a session
        of its own) if it has not within 20 s."""
        try:
            self.post("Browser.close")
            self.proc.wait(20)
        except (OSError, subprocess.TimeoutExpired):
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        finally:
            os.close(self._out)
            self._reader.join(10)
            os.close(self._in)
            self._log.close()


@dataclass
class Visit:
    png: bytes  # screenshot of the viewport, the first timeline scrolled to its top
    rect: list[float]  # the first timeline's box in the viewport: x, y, width, height
    console: list[dict[str, Any]]  # console calls, exceptions, error/warning log entries
    opened: list[str]  # alert ids whose evidence is open after clicking the first marker
    clicked: str  # the alert id of that marker


def visit(path: Path, tmp: Path) -> Visit:
    """Open the report in a fresh profile, scroll to the first timeline, screenshot it, click
    its first alert marker."""
    browser = Chromium(tmp / f"profile-{uuid.uuid4().hex[:6]}", tmp / "chromium.log")
    try:
        target = browser.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = browser.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Runtime", "Log", "Page"):
            browser.send(f"{domain}.enable", session=session)
        browser.send("Emulation.setDeviceMetricsOverride", {
            "width": WIDTH, "height": HEIGHT, "deviceScaleFactor": 1, "mobile": False}, session)
        browser.send("Page.navigate", {"url": path.as_uri()}, session)
        browser.wait(lambda m: m.get("method") == "Page.loadEventFired" and m.get("sessionId") == session)

        def evaluate(js: str) -> Any:
            reply = browser.send("Runtime.evaluate", {"expression": js, "returnByValue": True,
                                                      "awaitPromise": True}, session)
            assert "exceptionDetails" not in reply, reply
            return reply["result"].get("value")

        rect = evaluate("(() => { const s = document.querySelector('section.group svg.timeline');"
                        " s.scrollIntoView({block: 'start'}); const r = s.getBoundingClientRect();"
                        " return [r.x, r.y, r.width, r.height]; })()")
        evaluate("new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
        png = base64.b64decode(browser.send("Page.captureScreenshot", {"format": "png"}, session)["data"])
        clicked = evaluate("(() => { const m = document.querySelector('section.group svg .mk.sev-critical,"
                           " section.group svg .mk.sev-warning');"
                           " m.dispatchEvent(new MouseEvent('click', {bubbles: true}));"
                           " return m.getAttribute('data-alert'); })()")
        opened = evaluate("[...document.querySelectorAll('details.ev[open]')]"
                          ".map(d => d.getAttribute('data-alert'))")
        time.sleep(0.3)  # let late console messages arrive before they are collected
        console = [m for m in browser.messages if m.get("method") in (
            "Runtime.consoleAPICalled", "Runtime.exceptionThrown")
            or (m.get("method") == "Log.entryAdded"
                and m["params"]["entry"]["level"] in ("error", "warning"))]
        return Visit(png, rect, console, opened, clicked)
    finally:
        browser.close()


def read_png(data: bytes) -> tuple[int, int, list[list[tuple[int, ...]]]]:
    """Width, height and the pixels (RGB) of an 8-bit RGB/RGBA non-interlaced PNG."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, ihdr = 8, [], None
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            ihdr = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
    assert ihdr is not None
    width, height, depth, ctype, _, _, interlace = ihdr
    assert depth == 8 and ctype in (2, 6) and interlace == 0, ihdr
    bpp = 3 if ctype == 2 else 4
    raw, stride = zlib.decompress(b"".join(idat)), width * bpp
    rows, prev = [], bytearray(stride)
    for y in range(height):
        start = y * (stride + 1)
        kind_, line = raw[start], bytearray(raw[start + 1:start + 1 + stride])
        for i in range(stride):  # the PNG filters (RFC 2083 section 6)
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if kind_ == 1:
                line[i] = (line[i] + a) & 255
            elif kind_ == 2:
                line[i] = (line[i] + b) & 255
            elif kind_ == 3:
                line[i] = (line[i] + ((a + b) >> 1)) & 255
            elif kind_ == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append([tuple(line[i:i + 3]) for i in range(0, stride, bpp)])
        prev = line
    return width, height, rows


def test_page_loads_in_chromium_and_shows_the_timeline(written: Written, tmp_path: Path) -> None:
    v = visit(written.html_path, tmp_path)
    assert v.console == [], v.console
    assert v.opened == [v.clicked]  # the marker's click opened exactly its evidence
    shot = tmp_path / "timeline.png"  # kept with the test's files, to look at when this fails
    shot.write_bytes(v.png)
    width, height, rows = read_png(shot.read_bytes())
    assert (width, height) == (WIDTH, HEIGHT)
    assert -2 < v.rect[1] < 50 and v.rect[2] > 600 and v.rect[3] > 300, v.rect  # in view
    x, y, w, h = (max(0, round(n)) for n in v.rect)
    region = [px for row in rows[y:min(y + h, height)] for px in row[x:x + w]]
    ink = sum(1 for px in region if sum(px) < 600) / len(region)
    colours = {px for px in region}
    assert len(colours) > 30, len(colours)  # lines, bands, labels: not a blank or flat area
    assert 0.01 < ink < 0.6, ink
    assert sum(1 for px in region if px == CRITICAL_RGB) > 30  # the critical alert markers


# -- a hostile copy with a replay_runs row and data-quality results -------------------------------
@pytest.fixture(scope="module")
def hostile(e2e: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Written]]:
    dsn, run = e2e.settings.postgres.dsn, f"report-{uuid.uuid4().hex[:8]}"
    copy_run(dsn, e2e.run_id, run)
    try:
        with psycopg.connect(dsn) as conn:
            for table in ("alerts", "group_state", "node_state", "group_timeseries",
                          "node_timeseries"):
                conn.execute(f"UPDATE {table} SET group_id = %s WHERE run_id = %s"
                             " AND group_id = 'g3'", (HOSTILE, run))
            conn.execute("UPDATE alerts SET message = message || %s WHERE run_id = %s"
                         " AND group_id = %s", (" <script>console.error(1)</script>", run, HOSTILE))
            params = {"command": ["replimon", "replay", "--from", "2026-01-01T00:00:00.000Z",
                                  "--to", "2026-01-01T00:02:00.000Z", "--groups", "g3,g 4"],
                      "from_ms": 1767225600000, "to_ms": 1767225720000, "groups": ["g3", "g 4"],
                      "state_from": "checkpoint",
                      "starting_offsets": {"t-decisions": {"0": 12, "1": 40}},
                      "ending_offsets": {"t-decisions": {"0": 912, "1": 1040}}}
            conn.execute("INSERT INTO replay_runs (run_id, params, status) VALUES (%s, %s, 'done')",
                         (run, json.dumps(params)))
            conn.execute(
                "INSERT INTO dq_results (run_id, batch_id, suite, expectation, ts, success,"
                " evaluated, unexpected, details) VALUES"
                " (%(r)s, 0, 'replica.decisions', 'expect_column_values_to_not_be_null(node)', now(), true, 100, 0, '{}'),"
                " (%(r)s, 1, 'replica.decisions', 'expect_column_values_to_not_be_null(node)', now(), false, 80, 3,"
                "  '{\"sample\": [\"<b>bad</b>\"]}')", {"r": run})
        out = tmp_path_factory.mktemp("hostile")
        summary = write_report(dsn, run, out / "h.html", out / "h.md")
        yield run, Written(summary, out / "h.html", (out / "h.html").read_text(encoding="utf-8"),
                           (out / "h.md").read_text(encoding="utf-8"))
    finally:
        delete_run(dsn, run)


def test_data_is_escaped(hostile: tuple[str, Written], tmp_path: Path) -> None:
    _, w = hostile
    assert HOSTILE not in w.html and "<script>console" not in w.html and "<b>bad" not in w.html
    assert html.escape(HOSTILE, quote=True) in w.html
    assert md_cell(HOSTILE) in w.md
    sections = {s.group for s in Page(w.html).sections}
    assert HOSTILE in sections  # the parser reads the escaped attribute back as the name
    v = visit(w.html_path, tmp_path)
    assert v.console == [], v.console  # nothing from the data ran


def test_replay_parameters_and_data_quality_are_shown(hostile: tuple[str, Written]) -> None:
    run, w = hostile
    cmd = ("replimon replay --from 2026-01-01T00:00:00.000Z --to 2026-01-01T00:02:00.000Z "
           "--groups 'g3,g 4'")
    assert f"```sh\n{cmd}\n```" in w.md
    assert html.escape(cmd) in w.html
    assert '&quot;t-decisions&quot;: {\n    &quot;0&quot;: 912' in w.html  # ending offsets
    assert "a replay (replay_runs status done)" in w.md
    rows = md_table(w.md, "Data quality")
    # The failure written for this copy comes first; the rest are the e2e run's own (passed).
    assert rows[0] == ["replica.decisions", "expect_column_values_to_not_be_null(node)", "2", "1", "3"]
    assert all(r[3] == "0" for r in rows[1:])
    dq = Page(w.html).tables["dq"]
    assert dq[1][:6] == ["replica.decisions", "expect_column_values_to_not_be_null(node)", "2",
                         "1", "180", "3"]
    assert "No data-quality results" not in w.md


def test_generations_groups_have_a_generations_lane(e2e: Any, written: Written) -> None:
    """docs/report.md, "Timelines": an affected generations group's timeline has a generations
    lane with each generation it switched to (group_timeseries.config_version), in order, each
    with its time; an XCom group keeps its configurations band."""
    sections = dict(re.findall(r'<section class="group" id="tl-\d+" data-group="([^"]+)">(.*?)</section>',
                               written.html, re.S))
    gen = {g for g, s in e2e.group_states.items() if s["family"] == "gen"}
    drawn = gen & set(sections)
    assert drawn, "the e2e run's generations faults make affected groups"
    with psycopg.connect(e2e.settings.postgres.dsn) as conn:
        stored = {g: [v for (v,) in conn.execute(
            "SELECT config_version FROM group_timeseries WHERE run_id = %s AND group_id = %s"
            " AND config_version IS NOT NULL ORDER BY ts", (e2e.run_id, g))] for g in drawn}
    switched = 0
    for g in drawn:
        html = sections[g]
        steps = [int(n) for n in re.findall(r'<g class="genstep" data-gen="(\d+)">', html)]
        titles = re.findall(r'<g class="genstep" data-gen="\d+"><title>generation (\d+) from (\S+?Z)', html)
        assert steps == sorted(set(steps)) and steps[-1] == e2e.group_states[g]["config"]["num"], (g, steps)
        assert set(stored[g]) <= set(steps), (g, stored[g], steps)  # every stored step is drawn
        assert [int(n) for n, _ in titles] == steps and all(t[:4].isdigit() for _, t in titles)
        assert ">generation</text>" in html and ">installed</text>" not in html
        listed = re.search(r'<p class="gens">Generations: (.*?)</p>', html)
        assert listed and [f"gen {n} from {t}" for n, t in titles] == listed.group(1).split(", ")
        switched += len(steps) > 1
    assert switched  # a generation change is drawn as a step
    for g in {g for g in sections if e2e.group_states[g]["family"] == "xcom"}:
        assert "genstep" not in sections[g] and ">installed</text>" in sections[g]
        assert 'class="gens"' not in sections[g]


def test_chain_groups_have_a_views_lane(e2e: Any, written: Written) -> None:
    """docs/report.md, "Timelines": every affected chain group's timeline has a views lane (a
    step per epoch installed, in epoch order, ending at the group's epoch; labelled and listed
    with head..tail), and no generations lane."""
    sections = dict(re.findall(r'<section class="group" id="tl-\d+" data-group="([^"]+)">(.*?)</section>',
                               written.html, re.S))
    chain = {g for g, s in e2e.group_states.items() if s["family"] == "chain"}
    drawn = chain & set(sections)
    assert drawn, "the e2e run's chain faults make affected groups"
    for g in drawn:
        html = sections[g]
        epochs = [int(n) for n in re.findall(r'<g class="mk cfg viewstep" data-alert="\w+" tabindex="0" '
                                             r'data-epoch="(\d+)">', html)]
        assert epochs == sorted(set(epochs)) and epochs[-1] == e2e.group_states[g]["config"]["epoch"], (g, epochs)
        assert ">view</text>" in html and ">wedge / lease</text>" in html
        assert "genstep" not in html and ">installed</text>" not in html
        listed = re.search(r'<p class="views">Views: (.*?)</p>', html)
        assert listed and [int(n) for n in re.findall(r"epoch (\d+) \[", listed.group(1))] == epochs
