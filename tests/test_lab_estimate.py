"""The lab's --dry_run time estimate: measured seconds per command, replayed through the scheduler."""

from __future__ import annotations

import pytest

from masprm.running.commands import Task
from masprm.lab.estimate import SECONDS, estimate, job_seconds, rollout_label_seconds, schedule, world_seconds
from masprm.lab.job import Job

DEEP = world_seconds("toy_deep")   # the deep world's measured seconds (masprm/worlds/toy_deep/costs.yaml)


def test_the_schedule_by_hand():
    tasks = [Task("a", []), Task("b", [], after=("a",)), Task("c", [])]
    seconds = {"a": 10.0, "b": 20.0, "c": 5.0}
    # two slots: a and c start at 0; c ends at 5; a at 10, then b runs 10-30
    assert schedule(tasks, seconds, jobs=2) == 30.0
    # one slot: a 0-10; at 10 b and c are ready, b first (list order) 10-30, then c 30-35
    assert schedule(tasks, seconds, jobs=1) == 35.0
    # a task after one outside the list waits for nothing
    assert schedule([Task("x", [], after=("gone",))], {"x": 3.0}, jobs=1) == 3.0
    with pytest.raises(ValueError, match="cycle"):
        schedule([Task("p", [], after=("q",)), Task("q", [], after=("p",))], {"p": 1.0, "q": 1.0}, jobs=2)


def job(name: str, kind: str, **facts) -> Job:
    """A job priced from its record alone: its command line is never built here."""
    def never() -> list[str]:
        raise AssertionError("the estimate built a command line")
    return Job(name, kind, never, **facts)


def test_each_command_costs_its_conditions_times_its_seeds():
    def evaluation(*methods, logs="logs/toy_lab", agg="min", b=(3, 5)):
        return job("eval_x", "eval", seeds=(14, 24, 42), methods=methods, logs=logs,
                   settings={"b1": b[0], "b2": b[1], "bon_n": 8, "step_agg": agg})
    # 3 seeds x (SBS 3x5 64 s + MCTS 47 s) = 333 s; 2 x 3: 34 s
    assert job_seconds(evaluation("sbs_prm", "mcts_prm"), "logs/toy_demo") == 3 * (64 + 47)
    assert job_seconds(evaluation("sbs_prm", b=(2, 3)), "logs/toy_demo") == 3 * 34
    # best-of-N: the first command draws the passes (71 s), the others read them back (min 25 s, last 14 s)
    assert job_seconds(evaluation("bon_logprob", "bon_oracle_step"), "logs/toy_demo", draws=True) == 3 * (71 + 25)
    assert job_seconds(evaluation("bon_logprob", "bon_oracle_step"), "logs/toy_demo") == 3 * (25 + 25)
    assert job_seconds(evaluation("bon_prm", agg="last"), "logs/toy_demo") == 3 * 14
    # another world's seconds (toy_deep: MCTS 273 s, a training 138 s)
    assert job_seconds(evaluation("mcts_prm"), "logs/toy_demo", DEEP) == 3 * 273
    assert job_seconds(job("train_mc-prm", "train", objective="prm"), "logs/toy_demo", DEEP) == 138.0
    # the demo's own conditions, asked of its folder, are COMPLETED after make demo
    assert job_seconds(evaluation("mcts_prm", logs="logs/toy_demo"), "logs/toy_demo") == 0.0
    assert job_seconds(job("train_mc-prm", "train", objective="prm"), "logs/toy_demo") == SECONDS["train"] == 224.0
    bench = job("stepbench", "stepbench", scorers=2)
    assert job_seconds(bench, "logs/toy_demo") == 39.0 + 2 * 5.5


def test_the_sweeps_other_settings_are_costed_in_proportion():
    def evaluation(**settings):
        return job("sweep_12_x", "sweep", seeds=(14, 24, 42), methods=("sbs_prm", "mcts_orm", "bon_orm"),
                   logs="logs/toy_lab", settings=settings)
    # SBS 1 x 3 samples 3 + 3 + 3 + 3 = 12 agent messages against 3 x 5's 5 + 15 + 15 + 15 = 50: 64 x 12 / 50;
    # MCTS 9 simulations: 47 x 9 / 10; best-of-N with N = 3 draws its own passes: 71 x 3 / 8
    seconds = job_seconds(evaluation(b1=1, b2=3, n_simulations=9, bon_n=3, step_agg="last"), "logs/toy_demo")
    assert seconds == pytest.approx(3 * (64 * 12 / 50 + 47 * 9 / 10 + 71 * 3 / 8))
    # at the measured settings nothing changes: 3 x 5, 10 simulations, N = 8 reading the passes back (last: 14 s)
    assert job_seconds(evaluation(bon_n=8, step_agg="last"), "logs/toy_demo") == 3 * (64 + 47 + 14)


def test_a_rollout_schemes_stage_2_costs_its_measured_seconds():
    def labels(scheme, rollout=False):
        return job(f"labels_{scheme}", "labels", scheme=scheme, rollout=rollout)
    policy = True   # it samples the policy afresh (--rollout-policy)
    assert job_seconds(labels("mc_rollouts", policy), "logs/toy_demo") == 430.0
    assert job_seconds(labels("shapley", policy), "logs/toy_demo") == 3477.0   # the costliest measured
    assert rollout_label_seconds("not_measured_yet") == 3477.0
    assert job_seconds(labels("mc"), "logs/toy_demo") == 1.0   # a tree-derived scheme: about a second
    # toy_deep's own, measured (shapley: 6,842 s); its tree-derived stage 2: 30 s
    assert job_seconds(labels("shapley", policy), "logs/demo", DEEP) == 6842.0
    assert job_seconds(labels("mc"), "logs/demo", DEEP) == 30.0


def test_the_first_best_of_n_command_without_a_scorer_draws_whatever_its_aggregation():
    def bon(name, *methods, agg):
        return job(name, "eval", seeds=(42,), methods=methods, logs="logs/x", settings={"step_agg": agg})
    # toy_deep ranks by the last step only: its drawing command is a `last` one (77 s), the ORM's reads back (30 s)
    tasks = [bon("eval_no_scorer_last", "bon_logprob", agg="last"), bon("eval_orm_last", "bon_orm", agg="last")]
    assert estimate(tasks, set(), 1, "logs/demo", DEEP) == (77.0 + 30.0, 77.0 + 30.0)
    assert estimate(tasks, {"eval_no_scorer_last"}, 1, "logs/demo", DEEP)[0] == 30.0


def test_toy_deeps_generative_and_implicit_rows_cost_what_they_were_measured_at():
    def search(name, *methods):
        objective = name.partition("_")[2].split("-")[1].partition("_")[0]   # the row's, as the plan records it
        return job(name, "eval", objective=objective, seeds=(42,), methods=methods, logs="logs/x")
    # trainings: the gPRM's 916 s and the gORM's 547 s as measured, any other row's 138 s (implicit's included)
    assert job_seconds(job("train_first_error-gprm_s7", "train", objective="gprm"), "logs/demo", DEEP) == 916.0
    assert job_seconds(job("train_mc-gorm", "train", objective="gorm"), "logs/demo", DEEP) == 547.0
    assert job_seconds(job("train_mc-implicit", "train", objective="implicit"), "logs/demo", DEEP) == 138.0
    # SBS + MCTS at one seed: a scorer's 96 + 273 = 369 s; the implicit, gORM and gPRM rows' the middle of
    # their measured 797-908 s; their best-of-N ranking as any scorer's (30 s)
    assert job_seconds(search("eval_mc-prm_search", "sbs_prm", "mcts_prm"), "logs/demo", DEEP) == 369.0
    for row in ("mc-implicit", "mc-gorm", "first_error-gprm"):
        assert job_seconds(search(f"eval_{row}_search", "sbs_prm", "mcts_prm"), "logs/demo", DEEP) == \
            pytest.approx(852.5)
    assert job_seconds(search("eval_mc-gorm_last", "bon_prm"), "logs/demo", DEEP) == 30.0
    # the toy world never timed them apart: a scorer's seconds
    assert job_seconds(search("eval_mc-gorm_search", "sbs_prm", "mcts_prm"), "logs/demo") == 64.0 + 47.0
    assert job_seconds(job("train_mc-gorm", "train", objective="gorm"), "logs/demo") == 224.0
