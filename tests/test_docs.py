"""The README stays short, names every package folder, and every link in the docs leads somewhere."""

import re

from helpers import REPO


def test_the_readme_is_at_most_250_lines():
    assert len((REPO / "README.md").read_text().splitlines()) <= 250


def test_the_readme_names_every_package_folder():
    readme = (REPO / "README.md").read_text()
    folders = [p.name for p in (REPO / "src" / "masprm").iterdir() if (p / "__init__.py").is_file()]
    assert folders and not [f for f in folders if f"`{f}/`" not in readme]


def test_every_relative_link_of_the_readme_and_docs_exists():
    broken = []
    for doc in [REPO / "README.md", *(REPO / "docs").glob("*.md")]:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", doc.read_text()):
            if not target.startswith(("http://", "https://")) and not (doc.parent / target).exists():
                broken.append(f"{doc.name}: {target}")
    assert not broken
