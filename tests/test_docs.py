"""The README stays short, names every package folder, and every link in the docs leads somewhere."""

import re

from helpers import REPO


def test_the_readme_is_at_most_250_lines():
    assert len((REPO / "README.md").read_text().splitlines()) <= 250


def test_the_readme_names_every_package_folder():
    readme = (REPO / "README.md").read_text()
    folders = [p.name for p in (REPO / "src" / "masprm").iterdir() if (p / "__init__.py").is_file()]
    assert folders and not [f for f in folders if f"`{f}/`" not in readme]


DOCS = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
# [text](target) and reference definitions `[name]: target`
LINK = re.compile(r"\]\(([^)\s]+)\)|^\[[^\]]+\]:[ \t]+(\S+)", re.M)


def links(doc):
    return [m.group(1) or m.group(2) for m in LINK.finditer(doc.read_text())]


def anchors(page):
    """The anchors a Markdown page's headings get (GitHub's rule: lower case, punctuation dropped, spaces to -)."""
    heads = re.findall(r"^#+[ \t]+(.+)$", page.read_text(), re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in heads}


def test_every_relative_link_of_the_readme_and_docs_exists():
    broken = []
    for doc in DOCS:
        for link in links(doc):
            target = link.split("#")[0]
            if target and not link.startswith(("http://", "https://")) and not (doc.parent / target).exists():
                broken.append(f"{doc.relative_to(REPO)}: {target}")
    assert not broken


def test_every_anchor_of_a_link_names_a_heading():
    broken = []
    for doc in DOCS:
        for link in links(doc):
            target, _, anchor = link.partition("#")
            page = doc.parent / target if target else doc
            if anchor and not link.startswith(("http://", "https://")) and page.suffix == ".md" and page.exists() \
                    and anchor not in anchors(page):
                broken.append(f"{doc.relative_to(REPO)}: {link}")
    assert not broken


def test_every_table_a_person_reads_fits_a_screen():
    # a generated block may be wide (a run's full table); every other table row stays within 120 columns
    wide = []
    for doc in [REPO / "README.md", REPO / "docs" / "README.md", *sorted((REPO / "docs" / "lab").glob("*.md")),
                *sorted((REPO / "docs" / "reference").glob("*.md"))]:
        text = re.sub(r"<!-- report: [\w-]+ -->.*?<!-- /report -->", "", doc.read_text(), flags=re.S)
        wide += [f"{doc.relative_to(REPO)}: {line[:40]}" for line in text.splitlines()
                 if line.startswith("|") and len(line) > 120]
    assert not wide
