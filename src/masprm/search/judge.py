"""An LLM judge as a scorer kind: pooled_judge (voters) and mcts_judge (MCTS), the original newer branch's
"Experiment 2".

The judge is a generative model of its own (``--judge_model_id``), asked greedily
(by default) with one listwise call that never shows it the gold answer:

- over a voter pool (``weight``): every transcript of the shared pool, each
  message numbered; it replies with a credit in [-1, 1] per message. A run's
  weight is (mean credit + 1) / 2, as a log-weight with the voters' floor
  (``tanh_log_prob``), so the heaviest answer group wins. A reply that cannot be
  read gives every run the same weight (a plain majority vote);
- over an MCTS expansion (``step``): the candidate next messages of one state;
  it replies with a score in [-1, 1] per candidate, which is the child's initial
  value and, at a terminal child, its leaf value (``leaf``), as the MASPRM's
  value is used. A reply that cannot be read scores every candidate 0.

Each call counts in the usage (``judge_calls``, ``judge_tokens``: its prompt and
reply tokens, also added to the scorer tokens, since the judge does the
scorer's work) and an unreadable reply in ``judge_parse_failures``. The prompts
and the parser are this project's; the prompts' hash is in every judge
condition's fingerprint (``PROMPT_ID``). Pure Python: no torch import.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import TYPE_CHECKING, Any, Sequence

from masprm.search.engine import JUDGE_ROLE
from masprm.search.expand import SearchStep
from masprm.search.scorer_kinds import ScorerKind, spoken_trail, tanh_log_prob

if TYPE_CHECKING:
    from masprm.search.beam import Beam
    from masprm.search.context import SearchContext
    from masprm.search.expand import Candidate
    from masprm.search.node import Node


SYSTEM = ("You grade the work of a team of agents on a problem. You are not told the correct answer: "
          "judge each piece of work only by whether its reasoning is right and moves the solution forward.")

POOL_TASK = ("Give every numbered message of every attempt a credit between -1 and 1: near 1 for a correct "
             "step that brings the solution closer or fixes an earlier error, near -1 for a wrong or "
             "misleading step, near 0 for one that adds nothing. Length, confidence and agreeing with "
             "other messages earn nothing. Answer with one JSON object and nothing else: "
             '{"credits": [[...], ...]}, one list of numbers per attempt, in order; the attempts have '
             "{counts} messages.")

EXPANSION_TASK = ("Give every candidate a score between -1 and 1 for how far it takes the team towards a "
                  "correct answer from where it stands: near 1 for correct progress or a real fix, near -1 "
                  "for an error or a misleading claim. Length and confidence earn nothing. Answer with one "
                  'JSON object and nothing else: {"scores": [...]}, {n} numbers in candidate order.')

PROMPT_ID = hashlib.sha256("\0".join((SYSTEM, POOL_TASK, EXPANSION_TASK)).encode()).hexdigest()[:12]


# --------------------------------------------------------------------------- prompts


def pool_prompt(question: str, attempts: Sequence[Sequence[tuple[str, str]]]) -> list[dict]:
    """The listwise prompt over a pool: each attempt's (agent, message) pairs, numbered."""
    parts = [f"PROBLEM:\n{question}"]
    for a, steps in enumerate(attempts, start=1):
        lines = [f"ATTEMPT {a}:"] + [f"({m}) {agent}: {text}" for m, (agent, text) in enumerate(steps, start=1)]
        parts.append("\n".join(lines))
    parts.append(POOL_TASK.replace("{counts}", ", ".join(str(len(s)) for s in attempts)))
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "\n\n".join(parts)}]


def expansion_prompt(question: str, so_far: Sequence[tuple[str, str]], speaker: str,
                     candidates: Sequence[str]) -> list[dict]:
    """The listwise prompt over one expansion: the transcript so far and the candidates for the next message."""
    history = "\n".join(f"({m}) {agent}: {text}" for m, (agent, text) in enumerate(so_far, start=1)) or "(nothing yet)"
    parts = [f"PROBLEM:\n{question}", f"THE TEAM'S MESSAGES SO FAR:\n{history}",
             f"CANDIDATES FOR THE NEXT MESSAGE, BY {speaker}:",
             *(f"[{c}] {text}" for c, text in enumerate(candidates, start=1)),
             EXPANSION_TASK.replace("{n}", str(len(candidates)))]
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "\n\n".join(parts)}]


# --------------------------------------------------------------------------- replies


def _json_object(reply: str) -> Any:
    """The first {...} span of the reply that parses as JSON (None when there is none)."""
    start = reply.find("{")
    while start >= 0:
        depth = 0
        for end in range(start, len(reply)):
            depth += {"{": 1, "}": -1}.get(reply[end], 0)
            if depth == 0:
                try:
                    return json.loads(reply[start:end + 1])
                except json.JSONDecodeError:
                    break
        start = reply.find("{", start + 1)
    return None


def _clamped(values: Any) -> list[float] | None:
    if not isinstance(values, list) or not values:
        return None
    try:
        out = [float(v) for v in values if not isinstance(v, bool)]
    except (TypeError, ValueError):
        return None
    if len(out) != len(values) or any(v != v for v in out):   # a bool or a NaN
        return None
    return [min(1.0, max(-1.0, v)) for v in out]


def parse_credits(reply: str, n_attempts: int) -> list[list[float]] | None:
    """One list of credits in [-1, 1] per attempt, or None. A list of another length than its attempt's
    messages still counts: only its mean is used (the original's leniency)."""
    payload = _json_object(reply or "")
    rows = payload.get("credits") if isinstance(payload, dict) else None
    if not isinstance(rows, list) or len(rows) != n_attempts:
        return None
    parsed = [_clamped(row) for row in rows]
    return None if any(row is None for row in parsed) else parsed


def parse_scores(reply: str, n: int) -> list[float] | None:
    """Exactly ``n`` scores in [-1, 1], or None."""
    payload = _json_object(reply or "")
    scores = _clamped(payload.get("scores")) if isinstance(payload, dict) else None
    return scores if scores is not None and len(scores) == n else None


# --------------------------------------------------------------------------- the scorer kind


def _steps_of(trail: Sequence[Candidate]) -> list[tuple[str, str]]:
    return [(c.state.graph.agents[c.agent].name, c.text) for c in trail]


def pool_log_weights(ctx: SearchContext, beams: list[Beam]) -> SearchStep:
    """The runs' log-weights from one listwise call over the pool (module docstring)."""
    question = beams[0].state.question if beams else ""
    attempts = [_steps_of(spoken_trail(b)) for b in beams]
    reply = yield from ctx.ask_judge(pool_prompt(question, attempts))
    credits = parse_credits(reply, len(beams))
    if credits is None:
        ctx.usage.judge_parse_failures += 1
        return [tanh_log_prob(0.0)] * len(beams)
    return [tanh_log_prob(sum(row) / len(row)) for row in credits]


def expansion_scores(ctx: SearchContext, cands: Sequence[Candidate]) -> SearchStep:
    """Each candidate's ``score`` from one listwise call over the expansion (module docstring)."""
    if not cands:
        return
    first = cands[0]
    graph = first.parent.graph
    so_far = [(graph.agents[a].name, text) for a, text in first.parent.outputs.items()]
    reply = yield from ctx.ask_judge(expansion_prompt(first.parent.question, so_far, graph.agents[first.agent].name,
                                                      [c.text for c in cands]))
    scores = parse_scores(reply, len(cands))
    if scores is None:
        ctx.usage.judge_parse_failures += 1
        scores = [0.0] * len(cands)
    for c, s in zip(cands, scores):
        c.score = s


def _leaf_cached(ctx: SearchContext, path: list[Node]) -> SearchStep:
    return path[-1].info.get("score", 0.0)
    yield  # asks no model: the value came with the child


# Registered lazily by masprm.search.scorer_kinds (this module imports it).
JUDGE_KIND = ScorerKind(JUDGE_ROLE, expansion_scores, _leaf_cached, pool_log_weights, needs=(JUDGE_ROLE,))
