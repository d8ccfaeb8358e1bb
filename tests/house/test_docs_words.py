"""#28 item 12: what the README and docs/ say is what users have — every relative link resolves
inside the repository, no pointer into `../shared/` (the project's reference folder, absent for
users) or to a document that is not in the repository, and the README's example output is what
the tool prints."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from support import REPO_ROOT, cli

DOCS = [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
# a file name ending in .md written in prose (`docs/metrics.md`, chips.md); not inside a URL
MD_NAME = re.compile(r"(?<![\w/.:-])((?:\.\.?/)?[\w./-]*[\w-]\.md)\b")
# files the CI recipe writes (docs/ci.md names them), not documents
WRITTEN = {"report.md", "diff.md"}


def _inside(path: Path) -> bool:
    resolved = path.resolve()
    return resolved.exists() and REPO_ROOT.resolve() in (resolved, *resolved.parents)


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_relative_link_resolves_inside_the_repository(doc: Path) -> None:
    text = FENCE.sub("", doc.read_text(encoding="utf-8"))
    bad = []
    for m in LINK.finditer(text):
        target = m.group(1)
        if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
            continue  # a URL, or an anchor of this page
        if not _inside(doc.parent / target.split("#", 1)[0]):
            bad.append(target)
    assert bad == [], f"{doc.name}: links that do not resolve inside the repository: {bad}"


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_no_pointer_to_a_document_users_do_not_have(doc: Path) -> None:
    bad = []
    for n, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1):
        if "../shared" in line:
            bad.append(f"{n}: ../shared")
        for m in MD_NAME.finditer(line):
            name = m.group(1)
            if name in WRITTEN or "://" in line[: m.start()].rsplit(" ", 1)[-1]:
                continue
            if "GitHub `" in line:  # a file of another repository, named with its repository
                continue
            if not any(_inside(base / name) for base in (doc.parent, REPO_ROOT, REPO_ROOT / "docs")):
                bad.append(f"{n}: {name}")
    assert bad == [], f"{doc.name}: {bad}"


def test_the_readme_example_is_what_analyze_prints(capsys: pytest.CaptureFixture[str],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The example's lines before its "…" are the output's first lines and the ones after it its
    last, exactly (the README says it is printed at `--width 100`)."""
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    block = re.search(r"```text\n\$ (tilescope analyze \S+)\n(.*?)```", readme, re.DOTALL)
    assert block is not None
    command, shown = block.group(1), block.group(2).splitlines()
    head, tail = shown[: shown.index("…")], shown[shown.index("…") + 1:]
    monkeypatch.chdir(REPO_ROOT)  # the bundle's kernel file is looked up from here
    code, out, _ = cli(capsys, *command.split()[1:], "--width", "100")
    printed = out.splitlines()
    assert code == 0
    assert printed[: len(head)] == head
    assert printed[-len(tail):] == tail
    assert len(printed) > len(head) + len(tail)  # the "…" stands for lines
