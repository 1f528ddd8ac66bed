"""Headroom gates of a toy world: how much room a process scorer has, measured with the oracle scorers.

    python -m masprm.instruments.headroom --world toy_deep --split dev --out results/toy_deep_headroom.json
    python -m masprm.instruments.headroom --world toy --split train --out results/toy_headroom.json

A world is chosen by these numbers alone (issue 35), never by a learned scorer and never on its test
split. Every condition runs the world's policy on the same questions with the reference scorers of
`masprm.search.oracles` (no trained model):

- (a) the process oracle (``oracle_step``) against the outcome oracle (``oracle_outcome``) under MCTS
  at the demo's budget and settings (10 simulations, 3 children, c_uct 2, temperature 0.7) and under
  SBS 3x5 (temperature 0.7); and best-of-N with the outcome
  oracle at the agent samples the process oracle's MCTS used (N = its mean agent samples per question
  over the team's size, rounded): gate >= 8 points;
- (b) MCTS guided by an oracle restricted to the first half of the team (the first ``n // 2`` agents)
  against one restricted to the second half: a restricted oracle sees only the errors that start in
  its half (a message is wrong for it when it is the transcript's first wrong one and in its half):
  gate >= 5 points;
- (c) distinct terminals visited per process-oracle MCTS tree over the simulations: gate >= 0.7;
- (d) the share of 3-sample groups of the first agent (as one MCTS expansion samples them) that are
  one text: gate <= 50% (and, beside it, the share whose numbers are one reading).

Paired differences come with 95% bootstrap intervals over questions; ``paired_sd`` is the standard
deviation of the per-question difference of (a) under MCTS (the oracle pair's: it does not size
toy_deep's test split, which the pre-registered dev pilot of the learned pair does, `masprm.lab.power`).
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from masprm.checks import check_output_file, check_seeds
from masprm.cli import ArgumentParser, check, run_cli
from masprm.config import add_config_args, arg, config_from_args, require_each
from masprm.eval.methods import METHODS
from masprm.graph import MASGraph, load_mas_config
from masprm.io import atomic_write_json, atomic_write_text
from masprm.log import get_logger
from masprm.paired_stats import MIN_QUESTIONS, QUESTIONS_RULE, bootstrap_ci, mde, paired_se
from masprm.paths import PathText
from masprm.search.beam import Beam, beam_search
from masprm.search.context import SearchContext
from masprm.search.engine import LoadedModels, Models, RequestKeys, run_batched
from masprm.search.expand import propose
from masprm.search.oracles import STEP_ORACLES
from masprm.search.settings import MCTS_OPTIONS, BoNSettings, MCTSSettings, SBSSettings, StepOracleSettings
from masprm.worlds.toy.task import generate_split
from masprm.worlds import WORLDS

log = get_logger(__name__)
HALVES = ("first", "second")
GATES = {"a_mcts": 0.08, "a_sbs": 0.08, "b": 0.05, "c": 0.7, "d": 0.5}
TEMPERATURE = 0.7   # the demo's sampling temperature of MCTS, SBS and single passes (masprm.stages.demo)


def restricted_oracle(base: str, n_agents: int, half: str) -> Callable[[str, Sequence[str]], list[bool]]:
    """The step oracle `base` seeing only the errors that start in one half of the team (the first n // 2 agents,
    or the rest): every message is right for it except the transcript's first wrong one, when in its half."""
    cut = n_agents // 2

    def oracle(question: str, messages: Sequence[str]) -> list[bool]:
        right = list(STEP_ORACLES[base](question, messages))
        first = next((i for i, ok in enumerate(right) if not ok), None)
        mine = first is not None and (first < cut if half == "first" else first >= cut)
        return [not (mine and i == first) for i in range(len(right))]

    return oracle


def oracle_name(world: str, half: str) -> str:
    """The registered name of a world's half-restricted oracle (registered on first use)."""
    name = f"{world}@{half}"
    if name not in STEP_ORACLES:
        graph = load_mas_config(WORLDS[world].config)
        STEP_ORACLES.register(name, restricted_oracle(world, graph.n_agents, half))
    return name


# --------------------------------------------------------------------------- running the conditions


@dataclass(frozen=True)
class Condition:
    label: str
    method: str
    settings: Any


def conditions(world: str, sims: int, b1: int, b2: int, mcts_options: dict | None = None) -> list[Condition]:
    """The gates' searches; `mcts_options` sets MCTS's opt-in options (`MCTS_OPTIONS`: a world's declared ones)."""
    mcts = MCTSSettings(n_simulations=sims, max_children=3, c_uct=2.0, mcts_temperature=TEMPERATURE,
                        **(mcts_options or {}))
    sbs = SBSSettings(b1=b1, b2=b2, sbs_temperature=TEMPERATURE)
    out = []
    for label, method, oracle in (("mcts_step", "mcts_oracle_step", world), ("mcts_outcome", "mcts_oracle_outcome", None),
                                  ("sbs_step", "sbs_oracle_step", world), ("sbs_outcome", "sbs_oracle_outcome", None),
                                  *((f"mcts_{h}_half", "mcts_oracle_step", oracle_name(world, h)) for h in HALVES)):
        instances = {MCTSSettings: mcts, SBSSettings: sbs, StepOracleSettings: StepOracleSettings(oracle or world)}
        out.append(Condition(label, method, METHODS[method].settings_for(instances)))
    return out


def run_condition(models: Models, graph: MASGraph, cond: Condition, examples: Sequence[Any], seed: int,
                  batch_size: int) -> list[dict]:
    """Per question (in order): correct, agent samples, distinct terminals visited."""
    def job(ex):
        ctx = SearchContext(models.policy, graph, cond.settings, rng=random.Random(seed + ex.idx),
                            keys=RequestKeys(seed, ex.idx), example=ex)

        def search():
            result = yield from METHODS[cond.method].search(ctx, ex)
            return {"correct": result.prediction is not None and _right(result.prediction, ex.gold),
                    "agent_runs": ctx.usage.agent_runs, "terminals": result.extra.get("terminal_visited")}
        return ex.idx, search

    found = {}
    for idx, record, error in run_batched(models, (job(ex) for ex in examples), batch_size):
        if error is not None:
            raise error
        found[idx] = record
    return [found[ex.idx] for ex in examples]


def _right(prediction: str, gold: str) -> bool:
    from masprm.answers import is_correct
    return is_correct(prediction, gold)


def first_agent_groups(models: Models, graph: MASGraph, examples: Sequence[Any], seed: int, temperature: float,
                       batch_size: int, n: int = 3) -> list[list[str]]:
    """n samples of the first agent per question, as one MCTS expansion draws them."""
    settings = MCTSSettings()

    def job(ex):
        ctx = SearchContext(models.policy, graph, settings, keys=RequestKeys(seed, ex.idx), example=ex)

        def search():
            [cands] = yield from propose(ctx, [graph.start(ex.question)], graph.topo_order[0], n,
                                         temperature=temperature)
            return [c.text for c in cands]
        return ex.idx, search

    found = {idx: texts for idx, texts, _ in run_batched(models, (job(ex) for ex in examples), batch_size)}
    return [found[ex.idx] for ex in examples]


def pass_profile(models: Models, graph: MASGraph, world: str, examples: Sequence[Any], seed: int, temperature: float,
                 batch_size: int, n: int = 4) -> dict:
    """n single passes per question, judged by the world's step oracle and the gold check: the share of passes
    whose final answer is right, whose every message is right, and whose final answer is right after a wrong
    message (a chance hit: the outcome oracle can pick it, the process oracle cannot), and the share of passes
    whose first wrong message is each agent's."""
    settings, oracle = MCTSSettings(), STEP_ORACLES[world]

    def job(ex):
        ctx = SearchContext(models.policy, graph, settings, keys=RequestKeys(seed, ex.idx), example=ex)

        def search():
            beams = yield from beam_search(ctx, [Beam(graph.start(ex.question)) for _ in range(n)], width=n,
                                           branching=1, scorer=None, temperature=temperature)
            return [(list(b.state.outputs.values()), b.state.final_answer()) for b in beams]
        return ex, search

    right = steps_right = chance = 0
    first = [0] * (graph.n_agents + 1)                # the first wrong message's agent; the last slot: none
    for ex, passes, error in run_batched(models, (job(ex) for ex in examples), batch_size):
        if error is not None:
            raise error
        for messages, answer in passes:
            ok = list(oracle(ex.question, messages))
            wrong = next((i for i, good in enumerate(ok) if not good), graph.n_agents)
            final = answer is not None and _right(answer, ex.gold)
            right, steps_right, first[wrong] = right + final, steps_right + (wrong == graph.n_agents), first[wrong] + 1
            chance += final and wrong < graph.n_agents
    total = n * len(examples)
    return {"passes": total, "final_right": right / total, "all_steps_right": steps_right / total,
            "chance_hits": chance / total, "first_wrong": [c / total for c in first[:-1]]}


def agent_error_rates(models: Models, graph: MASGraph, world: str, examples: Sequence[Any], seed: int,
                      temperature: float, batch_size: int, n: int = 4) -> list[float]:
    """Each agent's error rate given a right prefix: n samples of every agent after the reference messages of
    the agents before it, judged by the step oracle (the policy's error profile, comparable with the rates of
    `masprm.instruments.synthetic_team`'s team)."""
    w = WORLDS[world]
    problems = {p.question: p for split in ("dev", "train") if split in w.task.splits   # never test
                for p in generate_split(split, w.task)}
    settings, oracle = MCTSSettings(), STEP_ORACLES[world]

    def job(ex):
        ctx = SearchContext(models.policy, graph, settings, keys=RequestKeys(seed, ex.idx), example=ex)
        reference = w.reference_outputs(problems[ex.question], random.Random(seed + ex.idx))

        def search():
            wrong, state = [], graph.start(ex.question)
            for agent in graph.topo_order:
                [cands] = yield from propose(ctx, [state], agent, n, temperature=temperature)
                before = [reference[a] for a in graph.topo_order[:len(wrong)]]
                wrong.append(sum(not oracle(ex.question, before + [c.text])[-1] for c in cands))
                state = state.decide(agent, reference[agent])
            return wrong
        return ex.idx, search

    totals = [0] * graph.n_agents
    for _, wrong, error in run_batched(models, (job(ex) for ex in examples), batch_size):
        if error is not None:
            raise error
        totals = [t + w for t, w in zip(totals, wrong)]
    return [t / (n * len(examples)) for t in totals]


# --------------------------------------------------------------------------- the gates


def difference(a: Sequence[bool], b: Sequence[bool], seed: int = 0) -> dict:
    """Mean of a − b over questions with a 95% bootstrap interval, and the differences' standard deviation."""
    diffs = [float(x) - float(y) for x, y in zip(a, b)]
    low, high = bootstrap_ci(diffs, lambda d: sum(d) / len(d), seed=seed)
    se = paired_se(diffs)
    return {"diff": sum(diffs) / len(diffs), "ci": [low, high], "sd": se * len(diffs) ** 0.5, "mde": mde(se)}


def one_text_share(groups: Sequence[Sequence[str]]) -> dict:
    same = sum(len(set(g)) == 1 for g in groups)
    readings = sum(len({tuple(re.findall(r"-?\d+", t)) for t in g}) == 1 for g in groups)
    return {"one_text": same / len(groups), "one_reading": readings / len(groups)}


def gates(runs: dict[str, list[dict]], groups: Sequence[Sequence[str]], n_agents: int, sims: int) -> dict:
    acc = {label: [r["correct"] for r in rows] for label, rows in runs.items()}
    samples = {label: sum(r["agent_runs"] for r in rows) / len(rows) for label, rows in runs.items()}
    trees = [r["terminals"] / sims for r in runs["mcts_step"]]
    out = {"accuracy": {label: sum(v) / len(v) for label, v in acc.items()}, "agent_samples": samples,
           "a_mcts": difference(acc["mcts_step"], acc["mcts_outcome"]),
           "a_sbs": difference(acc["sbs_step"], acc["sbs_outcome"]),
           "b": difference(acc["mcts_first_half"], acc["mcts_second_half"]),
           "c": sum(trees) / len(trees), "d": one_text_share(groups)}
    if "bon_outcome" in acc:
        out["a_bon"] = difference(acc["mcts_step"], acc["bon_outcome"])
    out["paired_sd"] = out["a_mcts"]["sd"]
    out["passed"] = {"a_mcts": out["a_mcts"]["diff"] >= GATES["a_mcts"], "a_sbs": out["a_sbs"]["diff"] >= GATES["a_sbs"],
                     "b": out["b"]["diff"] >= GATES["b"], "c": out["c"] >= GATES["c"], "d": out["d"]["one_text"] <= GATES["d"]}
    return out


def _mean(values: Sequence[Any]) -> Any:
    """The mean of numbers, of equally long lists of numbers, or of dicts of them (key by key)."""
    first = values[0]
    if first is None:            # a count a condition does not have (an SBS run's visited terminals)
        return None
    if isinstance(first, dict):
        return {k: _mean([v[k] for v in values]) for k in first}
    if isinstance(first, list):
        return [_mean(list(column)) for column in zip(*values)]
    return sum(values) / len(values)


def measure(models: Models, graph: MASGraph, world: str, examples: Sequence[Any], *, seeds: Sequence[int],
            sims: int = 10, b1: int = 3, b2: int = 5, batch_size: int = 8, mcts_options: dict | None = None) -> dict:
    """Every condition on `examples` at each search seed, then the gates (a)-(d) on the per-question means over
    the seeds (a question's outcome under a condition: its share of right answers, so the paired sd is the
    one a mean over these seeds has)."""
    per_seed, groups, passes, rates, bon_n = [], [], [], [], None
    for seed in seeds:
        runs = {}
        for cond in conditions(world, sims, b1, b2, mcts_options):
            log.info("headroom: %s on %d questions, seed %d", cond.label, len(examples), seed)
            runs[cond.label] = run_condition(models, graph, cond, examples, seed, batch_size)
        if bon_n is None:   # the first seed's agent samples fix N for every seed
            bon_n = max(1, round(sum(r["agent_runs"] for r in runs["mcts_step"]) / len(examples) / graph.n_agents))
        bon = METHODS["bon_oracle_outcome"].settings_for({BoNSettings: BoNSettings(bon_n=bon_n,
                                                                                     sbs_temperature=TEMPERATURE)})
        runs["bon_outcome"] = run_condition(models, graph, Condition("bon_outcome", "bon_oracle_outcome", bon),
                                            examples, seed, batch_size)
        per_seed.append(runs)
        groups += first_agent_groups(models, graph, examples, seed, TEMPERATURE, batch_size)
        passes.append(pass_profile(models, graph, world, examples, seed, TEMPERATURE, batch_size))
        rates.append(agent_error_rates(models, graph, world, examples, seed, TEMPERATURE, batch_size))
    pooled = {label: [_mean([runs[label][i] for runs in per_seed]) for i in range(len(examples))]
              for label in per_seed[0]}
    return {"world": world, "questions": len(examples), "seeds": list(seeds), "simulations": sims, "sbs": [b1, b2],
            "mcts_options": dict(mcts_options or {}),
            "bon_n": bon_n, **gates(pooled, groups, graph.n_agents, sims),
            "accuracy_per_seed": {str(seed): {label: _mean([float(r["correct"]) for r in rows])
                                              for label, rows in runs.items()} for seed, runs in zip(seeds, per_seed)},
            "passes": _mean(passes), "agent_error_rates": _mean(rates)}


def report_lines(r: dict) -> list[str]:
    def d(key):
        x = r[key]
        return f"{100 * x['diff']:+.1f} points [95% CI {100 * x['ci'][0]:+.1f}, {100 * x['ci'][1]:+.1f}]"
    mark = {True: "reached", False: "NOT reached"}
    p = r["passed"]
    options = "".join(f", {k} {v}" for k, v in r.get("mcts_options", {}).items())
    return [f"{r['world']}: {r['questions']} questions, search seeds {' '.join(map(str, r['seeds']))}{options}",
            "accuracy: " + ", ".join(f"{k} {100 * v:.1f}%" for k, v in r["accuracy"].items()),
            "agent samples / question: " + ", ".join(f"{k} {v:.1f}" for k, v in r["agent_samples"].items()),
            f"(a) process - outcome oracle, MCTS {r['simulations']} sims: {d('a_mcts')} (>= 8: {mark[p['a_mcts']]})",
            f"(a) process - outcome oracle, SBS {r['sbs'][0]}x{r['sbs'][1]}: {d('a_sbs')} (>= 8: {mark[p['a_sbs']]})",
            f"(a) MCTS process oracle - best-of-{r['bon_n']} outcome oracle (equal agent samples): {d('a_bon')}",
            f"(b) first-half - second-half oracle, MCTS: {d('b')} (>= 5: {mark[p['b']]})",
            f"(c) distinct terminals per tree / simulations: {r['c']:.2f} (>= 0.7: {mark[p['c']]})",
            f"(d) 3-sample first-agent groups that are one text: {100 * r['d']['one_text']:.1f}% "
            f"(<= 50%: {mark[p['d']]}); one reading: {100 * r['d']['one_reading']:.1f}%",
            "single passes: final answer right {final_right:.1%}, every message right {all_steps_right:.1%}, "
            "right after a wrong message (chance hits) {chance_hits:.1%}".format(**r["passes"]),
            "first wrong message, share of passes per agent: " + " ".join(f"{100 * x:.1f}%"
                                                                        for x in r["passes"]["first_wrong"]),
            "each agent's error rate after a right prefix: " + " ".join(f"{100 * x:.1f}%"
                                                                       for x in r["agent_error_rates"]),
            f"paired sd of (a) under MCTS, per question over the seeds: {r['paired_sd']:.4f} (MDE at 80% power "
            f"over these questions: {100 * r['a_mcts']['mde']:.1f} points)"]


def questions(world: Any, split: str, n: int | None, seed: int) -> list:
    """The split's first `n` questions in `seed`'s order, at least the two the gates' standard errors need
    (a split smaller than that is refused before any search)."""
    examples = list(world.task.load(split, n=n, seed=seed))
    check(len(examples) >= MIN_QUESTIONS, f"--split {split}: {len(examples)} question(s) in the {world.name} world; "
                                          f"the gates' standard errors need at least {MIN_QUESTIONS}")
    return examples


@dataclass(frozen=True)
class HeadroomArgs:
    world: str = arg("toy_deep", flags=("--world",), help="toy world (toy, toy_deep)")
    split: str = arg("dev", flags=("--split",), help="never the test split (default dev; the toy world has none: train)")
    policy: PathText | None = arg(None, flags=("--policy",), help="policy folder (default: the world's build)")
    n: int | None = arg(None, flags=("--n",), help="questions, at least 2 (a standard error needs two; default: "
                                                   "the whole split)")
    seeds: tuple[int, ...] = arg((14,), flags=("--seeds",), nargs="+",
                                 help="search seeds (the first one also orders the questions); the gates are on "
                                      "each question's mean over them")
    simulations: int = arg(10, flags=("--simulations",), help="MCTS simulations (the demo's 10)")
    batch_size: int = arg(8, flags=("--batch_size",), help="questions in flight")
    out: PathText = arg("results/toy_deep_headroom.json", flags=("--out",), help="JSON report (a .txt beside it)")

    def __post_init__(self) -> None:
        require_each(self, ("simulations", "batch_size"), lambda v: v >= 1, "must be at least 1")
        require_each(self, ("n",), lambda v: v >= MIN_QUESTIONS, QUESTIONS_RULE)
        check_seeds(self, ("seeds",))


def main() -> int:
    p = ArgumentParser(description="Headroom gates (a)-(d) of a toy world, with the oracle scorers.")
    add_config_args(p, HeadroomArgs)
    add_config_args(p.add_argument_group("MCTS options (opt-in; off: the original's rule)"), MCTSSettings,
                    only=MCTS_OPTIONS)
    ns = p.parse_args()
    args = config_from_args(HeadroomArgs, ns)
    picked = config_from_args(MCTSSettings, ns)   # checks the options as stage 4 does
    mcts_options = {name: getattr(picked, name) for name in MCTS_OPTIONS
                    if getattr(picked, name) != getattr(MCTSSettings(), name)}
    check(args.world in WORLDS, f"--world: {WORLDS.unknown_message(args.world)}")
    check(args.split != "test", "--split: the headroom gates are measured on dev (or train), never on test")
    world = WORLDS[args.world]
    check(args.split in world.task.splits, f"--split: {args.world} has splits {', '.join(world.task.splits)}")
    text_out = Path(args.out).with_suffix(".txt")   # the report's lines, beside the JSON
    check(text_out != Path(args.out), f"--out {args.out}: the text report goes beside it as .txt; name the JSON *.json")
    policy_dir = Path(args.policy or Path(world.out) / "policy")
    check((policy_dir / "config.json").is_file(), f"--policy: {policy_dir} is not a model folder "
                                                  f"(build it: python -m masprm.worlds.build --world {args.world})")
    inputs = {"policy": policy_dir, "team config": world.config}   # a file inside the policy changes it
    check_output_file(args.out, "out", inputs=inputs)
    check_output_file(text_out, "out", inputs=inputs)
    examples = questions(world, args.split, args.n, args.seeds[0])
    from masprm.models import backends   # imports torch: only once the flags are checked
    from masprm.models.options import ModelOptions

    models = LoadedModels(backends.load_policy(None, str(policy_dir), ModelOptions(device_map="cpu"), setting="policy"))
    report = measure(models, load_mas_config(world.config), args.world, examples, seeds=args.seeds,
                     sims=args.simulations, batch_size=args.batch_size, mcts_options=mcts_options)
    report["policy"], report["split"] = str(policy_dir), args.split
    atomic_write_json(Path(args.out), report)
    lines = report_lines(report)
    atomic_write_text(text_out, "\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    run_cli(main)
