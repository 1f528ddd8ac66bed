"""The reference pages of the label schemes and objectives (docs/reference/) are what `make report` writes from
the registries and module docstrings: a scheme or objective added, renamed or re-documented fails here until
`make report` has run."""

import pytest

from helpers import REPO
from masprm.labels import LABEL_SCHEMES
from masprm.objective_facts import objective_modes
from masprm.published import reference


def test_the_committed_pages_are_what_the_generator_writes():
    for path, text in reference.pages(REPO / "docs").items():
        assert path.read_text(encoding="utf-8") == text, f"{path.relative_to(REPO)}: run `make report`"


def test_every_scheme_and_objective_has_a_section_with_the_fixed_outline():
    pages = {path.stem: text for path, text in reference.pages(REPO / "docs").items()}
    schemes = reference.project_schemes()
    assert {"masprm", "mc", "step_truth"} <= set(schemes) and set(schemes) <= set(LABEL_SCHEMES.names())
    for page, names in (("label_schemes", schemes), ("objectives", objective_modes())):
        sections = pages[page].split("\n## ")[1:]
        assert [s.splitlines()[0] for s in sections] == list(names)
        for section in sections:
            for part in ("**What.**", "**Source.**", "**Records read.**", "**Flags.**", "**Cost.**", "**Lab rows.**"):
                assert part in section, (page, section.splitlines()[0], part)


def test_check_finds_a_changed_page(tmp_path, capsys):
    docs = tmp_path / "docs"
    docs.mkdir()
    assert reference.main(["--docs", str(docs)]) == 0             # written
    assert reference.main(["--docs", str(docs), "--check"]) == 0
    page = docs / "reference" / "objectives.md"
    page.write_text(page.read_text() + "a hand edit\n")
    assert reference.main(["--docs", str(docs), "--check"]) == 1
    assert "a hand edit" in capsys.readouterr().out
    assert page.read_text().endswith("a hand edit\n")              # --check writes nothing


@pytest.mark.parametrize("mode, flag", [("pqm", "--pqm-margin"), ("traj", "--agg"), ("ensemble", "--ensemble-heads")])
def test_an_objective_lists_the_flags_only_it_reads(mode, flag):
    text = reference.objectives_page(REPO / "docs")
    section = text.split(f"\n## {mode}\n")[1].split("\n## ")[0]
    assert f"`{flag}`" in section
    assert "`--pqm-margin`" not in section or mode == "pqm"
