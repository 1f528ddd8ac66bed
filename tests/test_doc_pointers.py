"""Every section the code points a reader to exists: `docs/<page>.md, "Title"` names a heading or a bold run-in
title (`**Title.** ...`) of that page, so a renamed or removed section fails here, not in a reader's hands."""

import re

import pytest

from helpers import REPO

# docs/page.md, then an optional `)` / `,`, then the quoted title (straight or curly quotes), possibly after a line
# break inside a comment; a code string that merely follows a path (`"docs/x.md", setting=`) is no pointer.
# a title in brackets after the page counts too.
POINTER = re.compile(r'(docs/[\w/.-]+\.md)\)?,?[ \t]*(?:\n[ \t]*#?[ \t]*)?(?:section[ \t]+)?\(?["“]([A-Za-z][^"”\n]{2,100})["”]')
SOURCES = [*sorted((REPO / "src").rglob("*.py")), *sorted((REPO / "bench").glob("*.py")),
           *sorted((REPO / "bench").glob("*.sh")), REPO / "Makefile", *sorted((REPO / "tests").glob("*.py"))]


def titles(page: str) -> list[str]:
    """A page's headings and bold run-in titles, lower case, without their closing punctuation."""
    text = (REPO / page).read_text()
    found = [m.group(1) for m in re.finditer(r"^#+[ \t]+(.+)$", text, re.M)]
    found += [m.group(1) for m in re.finditer(r"^\*\*([^*\n]+)\*\*", text, re.M)]
    return [t.strip().rstrip(".:").lower() for t in found]


def pointers() -> list[tuple[str, str, str]]:
    return [(str(path.relative_to(REPO)), m.group(1), m.group(2))
            for path in SOURCES for m in POINTER.finditer(path.read_text(errors="replace"))]


def test_the_code_points_into_the_docs_somewhere():
    assert len(pointers()) >= 10   # the pattern still finds the pointers the code is written with


@pytest.mark.parametrize("source, page, title", pointers())
def test_every_pointed_section_exists(source, page, title):
    assert (REPO / page).is_file(), f"{source}: {page} does not exist"
    wanted = title.strip().rstrip(".:").lower()
    assert any(t.startswith(wanted) for t in titles(page)), f"{source}: {page} has no section {title!r}"


def test_a_missing_section_is_found(tmp_path):
    # the matcher itself: a heading and a run-in title count, a phrase inside a paragraph does not
    page = "docs/toy_world.md"
    assert "same numbers on another machine" in titles(page)
    assert not any(t.startswith("chance hits") for t in titles(page))
