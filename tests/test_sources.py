"""Every citation of a source document in the code and the docs names a section that
``docs/sources.md`` lists, and no text of the source documents is copied into the repository
(docs/sources.md, "How citations are written")."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from tests.support.wheel import ROOT, tracked_files

SOURCES = ROOT / "docs" / "sources.md"
SEEDS = ROOT.parent / "shared" / "seeds"  # the design's copies, beside the checkout (CI has them)
TEXT = (".py", ".md", ".yaml", ".yml", ".sql", ".toml", ".txt", ".java", ".properties")

WORKLOG = re.compile(r"\b[Ww]orklog\s+(?:section\s+)?(\d+(?:\.\d+)*(?:\s*(?:,|and|/)\s*\d+(?:\.\d+)+)*)")
NAMED = re.compile(r"\b(?:[Ss]eed|RFC|NOTES|notes)(?:'s)?\s+(?:section\s+|heading\s+)?\"([^\"\s][^\"]{1,79})\"")
SITUATION = re.compile(r"\bRFC(?:'s)?\s+situations?\s+\((\d)\)")


def sections() -> dict[str, set[str]]:
    """The first column of each source's table in docs/sources.md: {source heading: names}."""
    out: dict[str, set[str]] = {}
    heading = ""
    for line in SOURCES.read_text(encoding="utf-8").splitlines():
        if line.startswith("## "):
            heading = line[3:]
            out[heading] = set()
        elif heading and line.startswith("| ") and not line.startswith("| ---"):
            out[heading].add(line.split("|")[1].strip())
    return out


def worklog_names() -> set[str]:
    (names,) = [v for k, v in sections().items() if k.startswith("MySQL WL#11512")]
    return names


def seed_names() -> set[str]:
    """Quoted headings of the other three sources (without their quotes)."""
    return {n.strip('"') for k, v in sections().items() if not k.startswith("MySQL") for n in v}


def cited_files() -> Iterator[tuple[str, str]]:
    for f in tracked_files():
        if f.endswith(TEXT) and f not in ("docs/sources.md", "tests/test_sources.py") and not f.startswith("docs/seeds/"):
            yield f, (ROOT / f).read_text(encoding="utf-8", errors="replace")


def worklog_section(number: str, names: set[str]) -> bool:
    """A design section number is listed, or is the parent of one that is (``3.6`` of ``3.6.1``)."""
    return number in names or any(n.startswith(number + ".") for n in names) or f"design {number}" in names


def test_sources_lists_each_document_with_its_location_and_licence() -> None:
    text = SOURCES.read_text(encoding="utf-8")
    for where in ("dev.mysql.com/worklog/task/?id=11512", "postgrespro/mmts", "Seagate/halon",
                  "cstorey/chain-replication-experiment", "264755a2b1226296a1eba08a98fb064f5a201b00",
                  "17fdacb2694d984fa4c6c4c9b80dd22646da22b0", "dd252f8959d424cd9c532d73bbed0d400768d527"):
        assert where in text
    assert {"3.6.3", "3.5", "3.3", "requirement 2.7", "design 1"} <= worklog_names()
    assert {"Wedging", "The group has quorum", "The voting procedure"} <= seed_names()


def test_every_worklog_citation_names_a_listed_section() -> None:
    names = worklog_names()
    bad, seen = [], 0
    for f, text in cited_files():
        for m in WORKLOG.finditer(text):
            for number in re.findall(r"\d+(?:\.\d+)*", m.group(1)):
                seen += 1
                if not worklog_section(number, names):
                    bad.append(f"{f}: worklog {number}")
    assert seen > 50
    assert not bad, bad


def test_every_named_section_citation_is_a_heading_of_its_source() -> None:
    names = seed_names()
    bad, seen = [], 0
    for f, text in cited_files():
        for m in NAMED.finditer(text):
            seen += 1
            name = " ".join(m.group(1).split())  # a name may wrap across lines
            if name not in names:
                bad.append(f'{f}: "{name}"')
        for n in SITUATION.findall(text):
            seen += 1
            if f"({n}) explained" not in names:
                bad.append(f"{f}: situation ({n})")
    assert seen > 20
    assert not bad, "cited sections that docs/sources.md does not list (or quotations): " + "; ".join(bad)


def test_a_wrong_citation_is_caught() -> None:
    names, worklog = seed_names(), worklog_names()
    assert [m.group(1) for m in NAMED.finditer('# Seed "No such heading": x')] == ["No such heading"]
    assert "No such heading" not in names
    assert not worklog_section("3.9", worklog) and worklog_section("3.6", worklog)


RUN = 8  # words in a row: longer runs shared with a source are a copy, not a coincidence


def words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.lower())


@pytest.mark.skipif(not SEEDS.is_dir(), reason="the design's source copies are not beside the checkout")
def test_no_text_of_the_source_documents_is_copied_into_the_repository() -> None:
    runs: dict[tuple[str, ...], str] = {}
    for seed in sorted(SEEDS.glob("0*.txt")):
        w = words(seed.read_text(encoding="utf-8"))
        for i in range(len(w) - RUN + 1):
            runs.setdefault(tuple(w[i:i + RUN]), seed.name)
    assert len(runs) > 5000
    copied: dict[str, list[str]] = {}
    for f, text in cited_files():
        w = words(text)
        for i in range(len(w) - RUN + 1):
            if tuple(w[i:i + RUN]) in runs:
                copied.setdefault(f, []).append(" ".join(w[i:i + RUN]))
    assert not copied, {f: found[:3] for f, found in copied.items()}
