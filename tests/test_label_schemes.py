"""Stage 2 label schemes (masprm.labels): each scheme's labels on hand-built trees, computed by hand."""

from __future__ import annotations

from collections import Counter
from fractions import Fraction
from types import SimpleNamespace

import pytest

from masprm.labels import LABEL_SCHEMES
from masprm.labels.advantage import advantage
from masprm.labels.balanced_pairs import BalancedPairsSettings
from masprm.labels.first_error import FirstErrorSettings, first_error_labels
from masprm.labels.margin_pairs import MarginPairsSettings
from masprm.labels.mining import Options, parse_tree
from masprm.labels.scheme import LabelContext, LabelRunner, walk
from masprm.labels.majority_outcome import majority_answer, relabel
from masprm.labels.pairs import edit_distance_at_least

from helpers_trees import gsm8k_tree, leaf, node, root, write_trees

SCHEMES = ["advantage", "balanced_pairs", "first_error", "majority_outcome", "margin_pairs", "masprm", "mc",
           "self_consistency"]


def records_of(name, tree_json, settings=None, **options):
    """The scheme's records of one tree (root window passed), and the context with its notes."""
    scheme = LABEL_SCHEMES[name]
    ctx = LabelContext(Options(**options), settings if settings is not None else
                       (scheme.settings() if scheme.settings else None))
    tree = parse_tree(tree_json, "t.json")
    if scheme.prepare:
        scheme.prepare(tree, ctx)
    return scheme.records(tree, ctx), ctx


def last_steps(pairs):
    return [(p["chosen_actions"][-1], p["rejected_actions"][-1], p.get("weight")) for p in pairs]


def test_every_scheme_is_registered_with_its_record_kind():
    assert set(SCHEMES) <= set(LABEL_SCHEMES.names())   # (a test may register one more)
    kinds = {name: LABEL_SCHEMES[name].kind for name in SCHEMES}
    assert kinds == {"advantage": "steps", "balanced_pairs": "pairs", "first_error": "steps", "margin_pairs": "pairs",
                     "masprm": "pairs", "mc": "steps", "self_consistency": "pairs", "majority_outcome": "pairs"}


# --------------------------------------------------------------------------- steps schemes
# gsm8k_tree: read(.2) -> {plan A(.5) -> solve A(.5) -> {answer 4 (+1), answer 5 (-1)},
#                          plan B(-1) -> solve B(-1) -> answer 7 (-1)}


def test_mc_labels_are_the_node_values():
    recs, _ = records_of("mc", gsm8k_tree())
    assert [r["labels"] for r in recs] == [[0.2, 0.5, 0.5, 1.0], [0.2, 0.5, 0.5, -1.0], [0.2, -1.0, -1.0, -1.0]]


def test_first_error_is_the_first_step_without_a_successful_rollout():
    recs, ctx = records_of("first_error", gsm8k_tree())
    # path 1 succeeds; path 2 fails only at its last step; path 3 fails at plan B, and stops there
    assert [(r["completions"], r["labels"]) for r in recs] == [
        (["read", "plan A", "solve A", "answer: 4"], [1.0, 1.0, 1.0, 1.0]),
        (["read", "plan A", "solve A", "answer: 5"], [1.0, 1.0, 1.0, -1.0]),
        (["read", "plan B"], [1.0, -1.0])]
    assert ctx.notes == Counter({"no_error_paths": 1, "first_error_at_step_3": 1, "first_error_at_step_1": 1})


def test_first_error_threshold_moves_the_error_up():
    recs, _ = records_of("first_error", gsm8k_tree(), FirstErrorSettings(first_error_threshold=0.3))
    assert [r["labels"] for r in recs] == [[-1.0]] * 3          # read (0.2) is at or below 0.3
    steps = [SimpleNamespace(value=v) for v in (0.6, 0.5, 0.9)]
    assert first_error_labels(steps, 0.5) == [1.0, -1.0]
    with pytest.raises(Exception, match="first_error_threshold"):
        FirstErrorSettings(first_error_threshold=1.0)


def test_advantage_is_the_value_minus_the_visited_siblings_mean_halved():
    recs, ctx = records_of("advantage", gsm8k_tree())
    # read, solve A/B and answer 7 have no sibling: 0. plan A: (0.5 - -1)/2; answers 4/5: (±1 - ∓1)/2
    assert [r["labels"] for r in recs] == [[0.0, 0.75, 0.0, 1.0], [0.0, 0.75, 0.0, -1.0], [0.0, -0.75, 0.0, 0.0]]
    assert (ctx.notes["steps"], ctx.notes["no_sibling_steps"]) == (12, 7)
    # an unvisited sibling has no value and is left out of the mean
    tree = parse_tree(root(0.0, leaf(0, "a", 1.0), leaf(0, "b", -0.5), leaf(0, "c", 0.0, visits=0)), "t")
    a, b, _ = tree.root.children
    assert advantage(a, tree.root) == (1.0 - -0.5) / 2 and advantage(b, tree.root) == (-0.5 - 1.0) / 2


# --------------------------------------------------------------------------- pair schemes


def fan(values):
    return root(0.0, *(leaf(0, f"answer {i}", v) for i, v in enumerate(values)))


def test_margin_pairs_keep_clear_margins_and_weigh_one_over_npos_nneg():
    # 3 candidates: 1 negative (-1), 2 positives (1, 0.2): gaps 2 and 1.2, weight 1/(2*1)
    recs, _ = records_of("margin_pairs", fan([1.0, 0.2, -1.0]), MarginPairsSettings(pair_margin=1.5), target_nodes=2)
    assert last_steps(recs) == [("answer 0", "answer 2", 0.5)]
    recs, _ = records_of("margin_pairs", fan([1.0, 0.2, -1.0]), MarginPairsSettings(pair_margin=0.5), target_nodes=2)
    assert last_steps(recs) == [("answer 0", "answer 2", 0.5), ("answer 1", "answer 2", 0.5)]
    # 4 candidates: 2 x 2 groups, weight 1/4; the 0.6 vs -0.2 pair (gap 0.8) is below a margin of 1
    recs, _ = records_of("margin_pairs", fan([1.0, 0.6, -0.2, -1.0]), MarginPairsSettings(pair_margin=1.0),
                         target_nodes=2)
    assert last_steps(recs) == [("answer 0", "answer 3", 0.25), ("answer 0", "answer 2", 0.25),
                                ("answer 1", "answer 3", 0.25)]
    # the paper's pairs: every strictly better pair, no weight field
    recs, _ = records_of("masprm", fan([1.0, 0.6, -0.2, -1.0]), target_nodes=2)
    assert len(recs) == 4 and all("weight" not in r for r in recs)


def test_margin_pairs_filters_are_off_by_default_and_keep_the_records():
    tree = fan([1.0, 0.6, -0.2, -1.0])
    plain, _ = records_of("margin_pairs", tree, MarginPairsSettings(pair_margin=0.5), target_nodes=2)
    off, _ = records_of("margin_pairs", tree, MarginPairsSettings(pair_margin=0.5, pair_require_outcome=False,
                                                                   pair_min_edit_distance=0), target_nodes=2)
    assert off == plain and len(plain) == 4


def test_margin_pairs_outcome_filter_needs_a_correct_end_below_the_positive_and_a_wrong_one_below_the_negative():
    # depth 0: good (.5) -> {+1, -1}; lucky (0) -> +1 and a dead end; stuck (-1) -> nothing written (dead ends only)
    tree = root(0.0, node(0, "good", 0.5, leaf(1, "answer 4", 1.0), leaf(1, "answer 5", -1.0), visits=2),
                node(0, "lucky", 0.0, leaf(1, "answer 4!", 1.0), visits=2), node(0, "stuck", -1.0, visits=2))
    settings = dict(pair_margin=0.5)
    plain, _ = records_of("margin_pairs", tree, MarginPairsSettings(**settings), target_nodes=3)
    filtered, _ = records_of("margin_pairs", tree, MarginPairsSettings(**settings, pair_require_outcome=True),
                             target_nodes=3)
    # plain, at depth 0: good over stuck (gap 1.5) and lucky over stuck (gap 1); at depth 1: answer 4 over answer 5
    assert [(c, r) for c, r, _ in last_steps(plain)] == [("good", "stuck"), ("lucky", "stuck"), ("answer 4", "answer 5")]
    # "stuck" reached no wrong answer (its rollouts died), so it is nobody's negative; no negative for lucky either
    assert [(c, r) for c, r, _ in last_steps(filtered)] == [("answer 4", "answer 5")]


def test_margin_pairs_edit_distance_filter_counts_characters():
    assert edit_distance_at_least("kitten", "sitting", 3) and not edit_distance_at_least("kitten", "sitting", 4)
    assert edit_distance_at_least("", "abc", 3) and not edit_distance_at_least("abc", "abc", 1)
    assert edit_distance_at_least("abc", "xyz", 0)
    a, b, c = "The total is 12 apples.", "The total is 13 apples.", "So we have twelve in all: 12"
    assert not edit_distance_at_least(a, b, 2)                             # one substitution
    assert edit_distance_at_least(c, b, 20)
    # one negative (b), two positives (a, c), both at least 0.5 above it; a and b are one character apart
    tree = root(0.0, leaf(0, a, 1.0), leaf(0, b, -1.0), leaf(0, c, -0.5))
    plain, _ = records_of("margin_pairs", tree, MarginPairsSettings(pair_margin=0.5), target_nodes=2)
    assert [(x, y) for x, y, _ in last_steps(plain)] == [(a, b), (c, b)]
    recs, _ = records_of("margin_pairs", tree, MarginPairsSettings(pair_margin=0.5, pair_min_edit_distance=20),
                         target_nodes=2)
    assert [(x, y) for x, y, _ in last_steps(recs)] == [(c, b)]
    with pytest.raises(Exception, match="pair_min_edit_distance"):
        MarginPairsSettings(pair_min_edit_distance=-1)


def two_level_tree():
    """Depth 0: a1 (.6), a2 (-.6), a3 (0); depth 1: a1 -> x (+1), y (-1); a2 -> z (+1), w (-1)."""
    return root(0.0, node(0, "a1", 0.6, leaf(1, "x", 1.0), leaf(1, "y", -1.0)),
                node(0, "a2", -0.6, leaf(1, "z", 1.0), leaf(1, "w", -1.0)), node(0, "a3", 0.0))


def test_balanced_pairs_cap_each_agent_so_later_agents_get_pairs():
    paper, _ = records_of("masprm", two_level_tree(), target_nodes=3)
    assert last_steps(paper) == [("a1", "a2", None), ("a3", "a2", None), ("x", "y", None), ("z", "w", None)]
    paper, _ = records_of("masprm", two_level_tree(), target_nodes=3, ppm_max_pairs=2)
    assert last_steps(paper) == [("a1", "a2", None), ("a3", "a2", None)]   # the first agent fills the tree's cap
    capped, _ = records_of("balanced_pairs", two_level_tree(), BalancedPairsSettings(per_agent_cap=1),
                           target_nodes=3, ppm_max_pairs=2)
    assert last_steps(capped) == [("a1", "a2", None), ("x", "y", None)]
    assert [r["meta"]["step_index"] for r in capped] == [0, 1]
    with pytest.raises(Exception, match="per_agent_cap"):
        BalancedPairsSettings(per_agent_cap=0)


# --------------------------------------------------------------------------- majority outcome (was self_consistency)


def test_self_consistency_is_the_old_name_of_majority_outcome_with_its_records_unchanged(tmp_path):
    old, new = LABEL_SCHEMES["self_consistency"], LABEL_SCHEMES["majority_outcome"]
    assert (old.records, old.prepare, old.kind) == (new.records, new.prepare, new.kind)
    paths = write_trees(tmp_path, [sc_tree()])
    by_name = {name: LabelRunner(LABEL_SCHEMES[name], Options(target_nodes=3)).label_file(paths[0])
               for name in ("self_consistency", "majority_outcome")}
    assert by_name["self_consistency"] and {r["meta"].pop("label_scheme") for r in by_name["self_consistency"]} == \
        {"self_consistency"}   # the old name's records say what they always said
    assert {r["meta"].pop("label_scheme") for r in by_name["majority_outcome"]} == {"majority_outcome"}
    assert by_name["self_consistency"] == by_name["majority_outcome"]


def sc_tree():
    """As stage 1 writes it (gold 5): r1 (5 visits) -> t1 '5' x3 (+1), t2 '6' (-1), t3 '6' (-1);
    r2 (4 visits, one of them a dead end) -> t4 '6' x2 (-1), t5 '7' (-1); the root has 9 visits."""
    r1 = node(0, "r1", 0.2, leaf(1, "Answer: 5", 1.0, visits=3), leaf(1, "so 6. Answer: 6", -1.0),
              leaf(1, "Answer: 6", -1.0), visits=5)
    r2 = node(0, "r2", -1.0, leaf(1, "6, Answer: 6", -1.0, visits=2), leaf(1, "Answer: 7", -1.0), visits=4)
    return root(-3 / 9, r1, r2, visits=9)


def test_majority_answer_groups_equal_answers_and_breaks_ties_by_first_seen():
    assert majority_answer(["Answer: 5", "so 6. Answer: 6", "Answer: 6", "6, Answer: 6", None]) == "so 6. Answer: 6"
    assert majority_answer(["Answer: 5", "Answer: 6", "Answer: 6", "five: 5", ""]) == "Answer: 5"  # 2 vs 2: first
    assert majority_answer([None, " "]) is None


def test_majority_outcome_backs_the_majority_rewards_up_exactly():
    tree = parse_tree(sc_tree(), "t")
    notes = Counter()
    relabel(tree, notes)
    values = {s.text: Fraction(s.value).limit_denominator(100) for s in walk(tree.root)}
    # majority '6' (3 votes): t2, t3, t4 become +1, t1 and t5 -1
    assert [values[t] for t in ("Answer: 5", "so 6. Answer: 6", "Answer: 6", "6, Answer: 6", "Answer: 7")] == \
        [-1, 1, 1, 1, -1]
    # r1: 3*(-1) + 1 + 1 over 5; r2: 2*(+1) + (-1) + the dead end (-1) over 4; root: (-1 + 0) / 9
    assert (values["r1"], values["r2"]) == (Fraction(-1, 5), 0)
    assert tree.root.value == pytest.approx(-1 / 9)
    # gold rewards agree on t5 only; the majority is not the gold; the stored numbers back up exactly
    assert notes == Counter({"trees": 1, "terminals": 5, "agree": 1, "majority_is_gold": 0, "exact_backups": 1})


def test_majority_outcome_keeps_the_stored_sum_of_unwritten_children():
    # 8 written children (the file's limit) and 2 visits more: their answers are unknown, their stored sum (+2) stays
    children = [leaf(0, f"{i}: Answer: 1", -1.0) for i in range(5)] + [leaf(0, f"{i}: Answer: 2", 1.0) for i in range(3)]
    tree = parse_tree(root(0.0, *children, visits=10), "t")
    relabel(tree, Counter())
    assert tree.root.value == pytest.approx((5 - 3 + 2) / 10)
    # 7 written children: the missing visits can only be dead ends (-1 each, whatever the labels)
    tree = parse_tree(root(-5 / 9, *children[:7], visits=9), "t")   # -5 + 2 - 2 dead ends
    notes = Counter()
    relabel(tree, notes)
    assert tree.root.value == pytest.approx((5 - 2 - 2) / 9) and notes["exact_backups"] == 1


def test_majority_outcome_pairs_come_from_the_relabelled_tree():
    recs, ctx = records_of("majority_outcome", sc_tree(), target_nodes=3)
    # depth 0: r2 (0) over r1 (-1/5); under r1 the '6' answers over '5'; under r2 '6' over '7'
    assert [(c, r) for c, r, _ in last_steps(recs)][:1] == [("r2", "r1")]
    assert ("so 6. Answer: 6", "Answer: 5") in [(c, r) for c, r, _ in last_steps(recs)]
    assert recs[0]["meta"]["pos_q"] == 0.0 and recs[0]["meta"]["neg_q"] == pytest.approx(-0.2)


# --------------------------------------------------------------------------- the runner


def test_runner_stamps_the_scheme_dedupes_and_uses_the_kinds_window(tmp_path):
    paths = write_trees(tmp_path, [gsm8k_tree(), gsm8k_tree(), gsm8k_tree(0.9)])
    runner = LabelRunner(LABEL_SCHEMES["first_error"], Options(), FirstErrorSettings())
    recs = [r for p in paths for r in runner.label_file(p)]
    assert len(recs) == 3 and {r["meta"]["label_scheme"] for r in recs} == {"first_error"}
    assert (runner.output.made, runner.output.duplicates, runner.output.outside_window) == (6, 3, 1)
    assert "[preprocess][labels first_error] files=3 trees=3 malformed=0 outside_root_window=1" in \
        runner.summary(tmp_path / "x.jsonl")
    # a pair scheme's window is --ppm-root-window; its summary counts the pairs per step (plan A|B, answer 4|5)
    runner = LabelRunner(LABEL_SCHEMES["masprm"], Options(ppm_root_window=(0.8, 1.0)))
    recs = [r for p in paths for r in runner.label_file(p)]
    assert runner.output.outside_window == 2 and len(recs) == 2
    assert "pairs per step 1:1 3:1" in runner.summary(tmp_path / "x.jsonl")
