"""The compute-matched sweep's mapping: budget in agent samples -> each search's setting (docs/scorer_lab.md)."""

from __future__ import annotations

import pytest

from masprm.lab.compute_match import BUDGETS, MCTS_GRID, SBS_GRID, bon_n, matched_setting, sweep_settings


def test_the_fixed_budgets_and_grids():
    assert BUDGETS == (4, 8, 12, 24)
    assert len(SBS_GRID) == 24 and SBS_GRID[0] == (1, 1) and SBS_GRID[-1] == (4, 6) and MCTS_GRID == tuple(range(1, 21))
    assert [bon_n(b) for b in BUDGETS] == [1, 2, 3, 6]   # one pass = one sample of each of the 4 agents
    with pytest.raises(ValueError, match="not a whole number of 4-agent passes"):
        bon_n(10)


def test_each_search_gets_the_largest_setting_that_fits():
    # made-up train-split means: SBS about 4 x B1 x B2 minus early finishes; MCTS a bit over one sample a simulation
    sbs = {(1, 1): 4.0, (1, 2): 7.5, (2, 1): 7.5, (1, 3): 11.0, (2, 2): 14.5, (2, 3): 21.0, (3, 2): 21.0, (2, 4): 27.0}
    mcts = {1: 4.0, 2: 5.0, 3: 6.2, 5: 8.0, 8: 11.9, 9: 12.4, 15: 23.9, 16: 24.1}
    plan = sweep_settings(sbs, mcts)
    # 4: only 1 x 1 (4.0, equal to the budget, counts) and one simulation
    assert plan[4] == {"bon_n": 1, "sbs": (1, 1), "mcts": 1}
    # 8: 1 x 2 and 2 x 1 tie at 7.5: the first in grid order, 1 x 2; MCTS 5 (8.0 <= 8)
    assert plan[8] == {"bon_n": 2, "sbs": (1, 2), "mcts": 5}
    # 12: 1 x 3 (11.0; 2 x 2's 14.5 is over); MCTS 8 (11.9; 9 is 12.4)
    assert plan[12] == {"bon_n": 3, "sbs": (1, 3), "mcts": 8}
    # 24: 2 x 3 and 3 x 2 tie at 21.0 -> 2 x 3; MCTS 15 (23.9; 16 is 24.1)
    assert plan[24] == {"bon_n": 6, "sbs": (2, 3), "mcts": 15}


def test_a_budget_below_every_setting_leaves_the_search_out():
    assert matched_setting({(1, 1): 4.4}, SBS_GRID, 4) is None
    assert matched_setting({}, MCTS_GRID, 24) is None


def test_sbs_samples_by_hand():
    from masprm.lab.compute_match import sbs_samples
    # each kept beam proposes B2 of every agent; min(B1, proposed) beams are kept
    assert sbs_samples(1, 1) == 4 and sbs_samples(1, 6) == 24
    assert sbs_samples(3, 5) == 5 + 15 + 15 + 15 == 50
    assert sbs_samples(2, 3) == 3 + 6 + 6 + 6 == 21
    assert sbs_samples(4, 2) == 2 + 4 + 8 + 8 == 22
    assert sbs_samples(3, 1) == 4                                   # one candidate: one beam whatever B1


def test_the_plan_gives_each_scorers_mcts_its_own_setting():
    from masprm.lab.compute_match import sweep_plan
    sbs = {(1, 1): 4.0, (1, 2): 8.0, (2, 2): 14.0, (1, 6): 24.0}
    mcts = {"masprm": {1: 13.75, 9: 21.3, 10: 24.5}, "orm": {1: 12.0, 8: 21.35}}
    plan = sweep_plan(sbs, mcts, budgets=(4, 12, 24))
    assert plan[4] == {("bon", "orm"): {"bon_n": 1, "step_agg": "last"}, ("sbs", "masprm"): {"b1": 1, "b2": 1},
                       ("sbs", "orm"): {"b1": 1, "b2": 1}, ("mcts", "masprm"): None, ("mcts", "orm"): None}
    # 12: SBS 1 x 2 (8.0; 2 x 2's 14.0 is over); the MASPRM's one simulation (13.75) is over, the ORM's (12.0) not
    assert plan[12][("sbs", "orm")] == {"b1": 1, "b2": 2}
    assert plan[12][("mcts", "masprm")] is None and plan[12][("mcts", "orm")] == {"n_simulations": 1, "max_children": 3}
    assert plan[24][("mcts", "masprm")] == {"n_simulations": 9, "max_children": 3}   # 10 is 24.5
    assert plan[24][("mcts", "orm")]["n_simulations"] == 8 and plan[24][("bon", "orm")]["bon_n"] == 6


def test_the_measurement_is_read_from_its_logs(tmp_path, capsys):
    from helpers_stage4_logs import write_stage4_log
    from masprm.lab.compute_match import main, read_measurement

    def log(method, settings, samples, name):
        manifest = {"condition": method, "seed": 14, "definition": {"method": method, "settings": settings}}
        write_stage4_log(tmp_path / f"toy_{method}_{name}_policy_14", [], manifest, label=method,
                         summary={"pass@1": 0.0, "agent_runs_mean": samples})
    log("sbs_prm", {"b1": 1, "b2": 1}, 4.0, "a")
    log("sbs_prm", {"b1": 1, "b2": 3}, 12.0, "b")
    log("mcts_prm", {"n_simulations": 1, "max_children": 3}, 13.75, "c")
    log("mcts_orm", {"n_simulations": 1, "max_children": 3}, 12.0, "d")
    log("mcts_orm", {"n_simulations": 1, "max_children": 5}, 20.0, "e")   # another width: not the grid's
    log("bon_orm", {"bon_n": 8, "step_agg": "last"}, 32.0, "f")           # not measured
    assert read_measurement(tmp_path) == ({(1, 1): 4.0, (1, 3): 12.0}, {"masprm": {1: 13.75}, "orm": {1: 12.0}})
    assert main(["--logs_dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "SBS agent samples per question: 1x1 4.00, 1x3 12.00" in out
    assert ("12 agent samples: bon + orm: N = 3, sbs + masprm: 1 x 3, sbs + orm: 1 x 3, mcts + masprm: none fits, "
            "mcts + orm: 1 simulation") in out


def test_the_fixed_sweep_is_the_rule_applied_to_the_measurement():
    from masprm.lab.compute_match import MEASURED_MCTS, MEASURED_SBS, SWEEP, sbs_samples
    # every setting of both grids was measured; SBS's means are its exact count (the scorer only chooses)
    assert set(MEASURED_SBS) == set(SBS_GRID) and all(set(m) == set(MCTS_GRID) for m in MEASURED_MCTS.values())
    assert all(MEASURED_SBS[s] == sbs_samples(*s) for s in SBS_GRID)
    sbs = {b: {"b1": 1, "b2": b // 4} for b in BUDGETS}   # SBS 1 x B2 samples 4 B2: exactly the budget
    for budget in BUDGETS:
        assert SWEEP[budget][("bon", "orm")] == {"bon_n": budget // 4, "step_agg": "last"}
        assert SWEEP[budget][("sbs", "masprm")] == SWEEP[budget][("sbs", "orm")] == sbs[budget]
    # MCTS: one simulation already samples 13.75 (MASPRM) / 12.0 (ORM) messages a question, so nothing fits 4
    # or 8, and only the ORM's one simulation fits 12; at 24 the trees are nearly full (21.85 / 21.75 from 18
    # / 17 simulations on: the first of the tied counts)
    assert [SWEEP[b][("mcts", "masprm")] for b in (4, 8, 12)] == [None] * 3
    assert [SWEEP[b][("mcts", "orm")] for b in (4, 8)] == [None] * 2
    assert SWEEP[12][("mcts", "orm")] == {"n_simulations": 1, "max_children": 3}
    assert SWEEP[24][("mcts", "masprm")] == {"n_simulations": 18, "max_children": 3}
    assert SWEEP[24][("mcts", "orm")] == {"n_simulations": 17, "max_children": 3}


def _measurement_log(folder, method, settings, samples, name):
    from helpers_stage4_logs import write_stage4_log

    manifest = {"condition": method, "seed": 14, "definition": {"method": method, "settings": settings}}
    write_stage4_log(folder / f"toy_{method}_{name}_policy_14", [], manifest, label=method,
                     summary={"pass@1": 0.0, "agent_runs_mean": samples})


def _run(monkeypatch, capsys, folder):
    from helpers import snapshot
    from helpers_cli import run_module

    before = snapshot(folder)
    result = run_module(monkeypatch, capsys, "masprm.lab.compute_match", ["--logs_dir", str(folder)])
    assert snapshot(folder) == before   # it reads, never writes
    return result


@pytest.mark.parametrize("present, missing", [
    ((), "sbs_prm / mcts_prm / mcts_orm"),                           # an empty folder
    (("bon",), "sbs_prm / mcts_prm / mcts_orm"),                     # a foreign folder: logs of another method
    (("sbs", "mcts_prm"), "mcts_orm"),                               # a part of the measurement
])
def test_a_folder_without_the_whole_measurement_is_refused_instead_of_a_plan_from_nothing(
        tmp_path, monkeypatch, capsys, present, missing):
    made = {"bon": ("bon_orm", {"bon_n": 8, "step_agg": "last"}), "sbs": ("sbs_prm", {"b1": 1, "b2": 1}),
            "mcts_prm": ("mcts_prm", {"n_simulations": 1, "max_children": 3})}
    for i, key in enumerate(present):
        _measurement_log(tmp_path, *made[key], 4.0, f"x{i}")
    code, lines, out = _run(monkeypatch, capsys, tmp_path)
    assert code == 2 and out == "" and lines == [
        f"compute_match.py: error: --logs_dir {tmp_path}: no COMPLETED {missing} log of the measurement (MCTS at "
        'max_children 3; docs/scorer_lab.md, "Compute-matched sweep"); the plan needs SBS and both MCTS rows']


@pytest.mark.parametrize("damage, said", [
    (lambda stem: stem.with_suffix(".txt").write_bytes(b"=== START sbs \xe9\nCOMPLETED\n"),
     ".txt: the stage-4 log is not UTF-8 text (byte 0xe9 at offset 14); save it as UTF-8"),
    (lambda stem: stem.with_name(stem.name + ".manifest.json").write_text('{"condition": '),
     ".manifest.json: not valid JSON (Expecting value: line 1 column 15 (char 14))"),
    (lambda stem: stem.with_name(stem.name + ".manifest.json").write_text("[1, 2]"),
     ".manifest.json: expected a JSON object, got list"),
])
def test_an_unreadable_log_or_sidecar_is_one_line_naming_the_file(tmp_path, monkeypatch, capsys, damage, said):
    _measurement_log(tmp_path, "sbs_prm", {"b1": 1, "b2": 1}, 4.0, "a")
    stem = tmp_path / "toy_sbs_prm_a_policy_14"
    damage(stem)
    code, lines, _ = _run(monkeypatch, capsys, tmp_path)
    assert code == 2 and lines == [f"compute_match.py: error: {stem}{said}"]


def test_a_folder_named_like_a_log_is_named_never_opened(tmp_path, monkeypatch, capsys):
    (tmp_path / "toy_sbs_prm_a_policy_14.txt").mkdir()
    code, lines, _ = _run(monkeypatch, capsys, tmp_path)
    assert code == 2 and lines == [f"compute_match.py: error: {tmp_path}/toy_sbs_prm_a_policy_14.txt: a folder, "
                                   "where a stage-4 log goes; move it out of the logs folder"]
