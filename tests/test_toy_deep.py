"""The deep toy world: its stories, splits, team transcripts, noisy SFT targets and step labeller."""

import random
import re

import pytest

from masprm.data import load_examples
from masprm.errors import DataError
from masprm.graph import load_mas_config
from masprm.search.oracles import STEP_ORACLES
from masprm.worlds.toy_deep import data as deep_data, task as deep_task
from masprm.worlds.toy_deep.label import label_transcript, op_error
from masprm.worlds.toy_deep.data import TOY_DEEP, power_plan, powered_size
from masprm.worlds.toy_deep.task import check_graph, deep_world, misread, noisy_transcript, training_turns, transcript
from masprm.worlds.toy.task import Problem, apply_op, generate_split

# A hand-made story: 7 apples, buys 5 more (12), the number doubles (24), gives away 4 (20),
# splits into 4 piles and keeps one (5), finds 9 more (14). Mia's 6 pens are someone else's.
STORY = Problem("Tom has 7 apples. He buys 5 more. Then the number of apples doubles. He gives away 4. "
                "He splits them into 4 equal piles and keeps one. He finds 9 more apples. Mia has 6 pens. "
                "How many apples does Tom have now?", 7, (("+", 5), ("*", 2), ("-", 4), ("/", 4), ("+", 9)),
                14, True, ("buy", "double", "give", "split", "find"))
RIGHT = ["Numbers: 7 5 4 4 9", "Plan: 7 +5 *2 -4 /4 +9", "Now 7+5=12.", "Then 12*2=24.", "Next 24-4=20.",
         "So 20/4=5.", "Now 5+9=14.", "Checked. Answer: 14"]


def test_the_hand_made_story_has_the_reference_transcript_written_by_hand():
    assert STORY.written == (7, 5, 4, 4, 9)
    assert transcript(STORY) == ["Numbers: 7 5 4 4 9", "Plan: 7 +5 *2 -4 /4 +9", "Now 7+5=12.", "Now 12*2=24.",
                                 "Now 24-4=20.", "Now 20/4=5.", "Now 5+9=14.", "Checked. Answer: 14"]
    assert label_transcript(STORY, RIGHT).first_error is None
    assert label_transcript(STORY, RIGHT).final_correct


@pytest.mark.parametrize("messages, first, kind", [
    # the Reader takes Mia's 6: every later message follows it and is wrong by the story's truth
    (["Read: 7 5 6 4 9", "Plan: 7 +5 *2 -6 /4 +9", "Now 7+5=12.", "Now 12*2=24.", "Now 24-6=18.", "Now 18/4=4.",
      "Now 4+9=13.", "Done. Answer: 13"], 0, "distractor"),
    # the Planner turns "gives away 4" into +4
    (RIGHT[:1] + ["Ops: 7 +5 *2 +4 /4 +9", "Now 7+5=12.", "Now 12*2=24.", "Now 24+4=28.", "Now 28/4=7.",
                  "Now 7+9=16.", "Final. Answer: 16"], 1, "wrong_op"),
    # Op3 slips (24-4=21 is false); Op4 then works on a wrong total
    (RIGHT[:4] + ["Next 24-4=28.", "So 28/4=7.", "Now 7+9=16.", "Checked. Answer: 16"], 4, "arithmetic"),
    # Op2 applies the wrong operation (true arithmetic, not the story's step)
    (RIGHT[:3] + ["Then 12+2=14."], 3, "wrong_input"),
    # the Verifier misstates the total
    (RIGHT[:7] + ["Checked. Answer: 15"], 7, "introduced"),
])
def test_the_first_wrong_message_of_hand_built_transcripts(messages, first, kind):
    label = label_transcript(STORY, messages)
    assert label.first_error == first and label.steps[first].kind == kind and not label.final_correct
    assert all(step.correct for step in label.steps[:first])


def test_the_verifier_repeating_a_wrong_total_missed_it():
    followed = ["Read: 7 5 6 4 9", "Plan: 7 +5 *2 -6 /4 +9", "Now 7+5=12.", "Now 12*2=24.", "Now 24-6=18.",
                "Now 18/4=4.", "Now 4+9=13.", "Done. Answer: 13"]
    assert [s.kind for s in label_transcript(STORY, followed).steps] == [
        "distractor", "distractor", None, None, "wrong_input", "wrong_input", "wrong_input", "missed"]


def test_a_repaired_transcript_and_an_unfinished_one():
    repaired = label_transcript(STORY, RIGHT[:4] + ["Next 24-4=21.", "So 20/4=5.", "Now 5+9=14.",
                                                    "Checked. Answer: 14"])
    assert repaired.first_error == 4 and repaired.steps[5].correct and repaired.final_correct and repaired.repaired
    partial = label_transcript(STORY, RIGHT[:3])
    assert partial.first_error is None and not partial.final_correct and len(partial.steps) == 3
    with pytest.raises(ValueError, match="at most 8 messages"):
        label_transcript(STORY, RIGHT + ["Answer: 14"])


def test_op_messages_that_cannot_be_read():
    assert op_error(STORY, 0, "Now twelve.") == "no_equation"
    assert op_error(STORY, 0, "Now 7+5=12, 12*2=24.") == "extra"
    assert op_error(STORY, 4, "Now 5+9=14.") is None


def test_the_step_oracle_finds_dev_stories_by_their_question():
    problem = generate_split("dev", TOY_DEEP)[0]
    oracle = STEP_ORACLES["toy_deep"]
    assert oracle(problem.question, transcript(problem)[:3]) == [True, True, True]
    wrong = transcript(problem)
    wrong[0] = "Read: 99"
    assert oracle(problem.question, wrong)[0] is False


def test_stories_have_k_events_running_totals_in_range_and_the_gold_they_compute():
    for k in deep_task.DESIGNS:
        for p in generate_split("dev", deep_world(k)):
            assert len(p.ops) == k
            total = p.start
            for op, n in p.ops:
                total = apply_op(total, op, n)
                assert 1 <= total <= 50
            assert total == p.answer and p.question.endswith("?")
            assert label_transcript(p, transcript(p, random.Random(1))).first_error is None


def test_splits_are_disjoint_sized_and_assigned_by_hash():
    sizes = dict(TOY_DEEP.sizes)
    assert sizes["test"] == (0 if deep_data.DEV_POWER is None else powered_size(*deep_data.DEV_POWER))
    questions = {}
    for split in ("dev", "train", "test"):
        problems = generate_split(split, TOY_DEEP)
        assert len(problems) == sizes[split] == len({p.question for p in problems})
        assert split == "test" or len(problems) == {"dev": 300, "train": 400}[split]
        assert all(TOY_DEEP.split_of(p.question) == split for p in problems)
        questions[split] = {p.question for p in problems}
    assert not (questions["dev"] & questions["train"] or questions["dev"] & questions["test"]
                or questions["train"] & questions["test"])
    first_sft = next(TOY_DEEP.iter_split("sft"))
    assert all(first_sft.question not in qs for qs in questions.values())


def test_the_power_computation_by_hand():
    # SE* = 0.025 / (1.959964 + 0.841621); SE*^2 = 0.025^2 / 7.848879 = 7.96292e-5
    # no training-seed variance: N = ceil(0.25^2 / 7.96292e-5) = ceil(784.89) = 785, MDE 2.4998 points
    plan = power_plan(0.25)
    assert (plan.n, plan.reached) == (785, True) and plan.mde == pytest.approx(0.024998, abs=1e-6)
    assert powered_size(0.30, target=0.03) == 785                 # sd 0.30 for 3 points: the same 784.89
    # tau2 0.00003 over 3 seeds: 1e-5 of SE*^2 gone; ceil(0.0625 / 6.96292e-5) = ceil(897.61) = 898
    assert powered_size(0.25, 0.00003) == 898
    # 3 seeds count: with 6 the seed term is 5e-6, ceil(0.0625 / 7.46292e-5) = ceil(837.47) = 838
    assert powered_size(0.25, 0.00003, n_seeds=6) == 838


def test_the_power_rules_floor_and_cap():
    # the floor: ceil(0.1^2 / 7.96292e-5) = 126 questions -> 300; MDE 2.801585 x 0.1 / sqrt(300) = 1.62 points
    plan = power_plan(0.10)
    assert (plan.n, plan.reached) == (300, True) and plan.mde == pytest.approx(0.016175, abs=1e-6)
    assert powered_size(0.25, target=0.05) == 300                 # 196.2 -> the floor
    # beyond the cap: ceil(0.5^2 / 7.96292e-5) = 3140 -> 3000, MDE 2.801585 x 0.5 / sqrt(3000) = 2.5575 points
    plan = power_plan(0.50)
    assert (plan.n, plan.reached) == (3000, False) and plan.mde == pytest.approx(0.025575, abs=1e-6)
    # no N at all: tau2 / 3 = 1e-4 > SE*^2; the cap, MDE 2.801585 x sqrt(0.0625 / 3000 + 1e-4) = 3.0797 points
    plan = power_plan(0.25, 0.0003)
    assert (plan.n, plan.reached) == (3000, False) and plan.mde == pytest.approx(0.030797, abs=1e-6)


def test_the_variance_components_of_3_seeds_by_4_questions_by_hand():
    from masprm.lab.power import dev_power
    q = ("q1", "q2", "q3", "q4")
    d = [dict(zip(q, row)) for row in ([1, 1, 1, 1], [0, 0, 0, 0], [1, 1, 0, 0])]
    # seed means 1, 0, 0.5: sample variance 0.25; within-seed variances 0, 0, 1/3: mean 1/9, / 4 questions = 1/36
    # tau2 = 0.25 - 1/36 = 2/9; question means 2/3, 2/3, 1/3, 1/3: sd_q = sqrt((4 / 36) / 3) = sqrt(1/27)
    sd_q, tau2 = dev_power(d)
    assert sd_q == pytest.approx((1 / 27) ** 0.5) and tau2 == pytest.approx(2 / 9)
    # seeds that agree beyond their noise: means 0.5, 0.75, 0.25 (variance 0.0625) against within-seed
    # variances 1/3, 1/4, 1/4 (mean 5/18, / 4 = 0.0694): tau2 clipped at 0
    d = [dict(zip(q, row)) for row in ([1, 0, 0, 1], [1, 1, 0, 1], [0, 0, 0, 1])]
    assert dev_power(d)[1] == 0.0
    # only the questions every seed has count; one seed or one question is refused
    assert dev_power([{**d[0], "q5": 9}, d[1], d[2]]) == dev_power(d)
    with pytest.raises(DataError, match="at least 2 training seeds and 2 common questions"):
        dev_power(d[:1])


def test_the_dataset_is_registered_with_its_splits():
    loaded = load_examples("toy_deep", "dev", n=5, seed=3)
    assert len(loaded) == 5 and {ex.meta["dataset"] for ex in loaded} == {"toy_deep"}
    dev = {p.question for p in generate_split("dev", TOY_DEEP)}
    assert all(ex.question in dev and re.fullmatch(r"#### \d+", "#### " + ex.gold.split()[-1]) for ex in loaded)
    with pytest.raises(Exception, match="toy_deep has splits sft, dev, train, test"):
        load_examples("toy_deep", "validation")


def test_the_team_config_and_its_turns():
    graph = load_mas_config("configs/toy_deep.yaml")
    check_graph(graph)
    check_graph(load_mas_config("configs/toy_deep3.yaml"))
    with pytest.raises(ValueError, match="Reader -> Planner -> Op1"):
        check_graph(load_mas_config("configs/toy.yaml"))
    turns = list(training_turns([STORY], graph, seed=0))
    assert [agent for agent, _, _ in turns] == list(range(8))
    _, messages, output = turns[4]   # Op3 reads the plan and Op2's message, nothing else
    assert messages[0]["content"].startswith("Op3:")
    assert re.fullmatch(r"\w+: 7 \+5 \*2 -4 /4 \+9\n\n\w+ 12\*2=24\.", messages[1]["content"])
    assert re.fullmatch(r"\w+ 24-4=20\.", output)


def test_noisy_targets_misread_early_and_the_team_follows():
    rng = random.Random(0)
    for _ in range(50):
        numbers, start, ops = misread(STORY, rng)
        assert numbers != list(STORY.written) and sum(a != b for a, b in zip(numbers, STORY.written)) == 1
        assert start == numbers[0] and ops[1] == ("*", 2)   # "doubles" writes no number: its 2 is never misread
    counts = {i: 0 for i in (None, *range(8))}
    for _ in range(4000):
        label = label_transcript(STORY, noisy_transcript(STORY, rng, 0.2))
        counts[label.first_error] += 1
        assert label.first_error != 7   # the Verifier states the last total it was given: never the first error
    # the Reader and the Planner err with 0.2, each of the 5 Op agents with 0.2 x 0.85 = 0.17 (OP_NOISE_SHARE):
    # P(no error) = 0.8^2 x 0.83^5 = 0.2512, P(Reader first) = 0.2, P(Planner first) = 0.8 x 0.2 = 0.16,
    # P(Op1 first) = 0.8^2 x 0.17 = 0.1088
    assert deep_task.OP_NOISE_SHARE == 0.85
    expected = {None: 0.8 ** 2 * 0.83 ** 5, 0: 0.2, 1: 0.16, 2: 0.1088}
    assert all(abs(counts[i] / 4000 - p) < 0.025 for i, p in expected.items()), counts
    assert all(label_transcript(STORY, noisy_transcript(STORY, rng, 0.0)).first_error is None for _ in range(20))


def test_an_op_slip_is_a_false_equation_the_next_op_goes_on_from():
    out = transcript(STORY, slips=(0, 0, 1, 0, 0))    # Op3 writes 24-4=21; Op4 divides 21
    assert out[2:] == ["Now 7+5=12.", "Now 12*2=24.", "Now 24-4=21.", "Now 21/4=5.", "Now 5+9=14.",
                       "Checked. Answer: 14"]          # 21 // 4 = 5: the slip is absorbed (a chance hit)
    assert label_transcript(STORY, out).first_error == 4 and label_transcript(STORY, out).final_correct
    out = transcript(STORY, slips=(0, 0, 0, 0, -2))
    assert out[-2:] == ["Now 5+9=12.", "Checked. Answer: 12"] and label_transcript(STORY, out).first_error == 6
