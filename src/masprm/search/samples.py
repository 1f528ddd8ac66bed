"""k complete passes through the team, sampled once and reusable: what voters and best-of-N rank.

`sample_passes` advances k independent single passes together (one policy
call per agent, each prompt on its own random stream), as the voters always
have. Several conditions rank the same passes at one seed (best-of-N under
every scorer, the voters), so a `SampleStore` keeps each example's passes
in a file and a later condition reads them back instead of sampling again.
What is read back is exactly what would be sampled: the key is the policy,
the team, the data, the seed, the code, the example and the sampling
settings; the read-back passes are counted in the usage as if sampled (a
condition reports the sampling work it stands for), and the example's random
streams are advanced past the requests they stand for. Pure Python: no torch import.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from masprm.interfaces import Generation
from masprm.io import atomic_write_json
from masprm.search.beam import Beam, beam_search
from masprm.search.context import SearchContext
from masprm.search.expand import Candidate, SearchStep

STORE_VERSION = 1


def _plain(obj: Any) -> Any:
    """As JSON reads it back (tuples become lists), so a stored key compares equal to a fresh one."""
    return json.loads(json.dumps(obj, sort_keys=True, default=str))


@dataclass(frozen=True)
class SampleStore:
    """Sampled passes of one (policy, team, data, seed, code) identity, one JSON file per example and setting.

    ``folder/<hash of identity and sampling settings>/<example index>.json``; a file whose key differs
    from the one asked for (or that cannot be read) counts as missing and is written again.
    """

    folder: Path
    identity: dict

    def _key(self, spec: dict, example: int, question: str) -> dict:
        return _plain({"version": STORE_VERSION, "identity": self.identity, "sampling": spec,
                       "example": example, "question": question})

    def _path(self, key: dict) -> Path:
        group = {k: key[k] for k in ("version", "identity", "sampling")}
        digest = hashlib.sha1(json.dumps(group, sort_keys=True).encode("utf-8")).hexdigest()[:16]
        return Path(self.folder) / digest / f"{key['example']}.json"

    def load(self, spec: dict, example: int, question: str) -> dict | None:
        key = self._key(spec, example, question)
        try:
            entry = json.loads(self._path(key).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return entry if isinstance(entry, dict) and entry.get("key") == key else None

    def save(self, spec: dict, example: int, question: str, entry: dict) -> None:
        key = self._key(spec, example, question)
        atomic_write_json(self._path(key), {"key": key, **entry}, indent=None)


def _entry(runs: list[Beam], requests: int) -> dict:
    return {"requests": requests,
            "runs": [[{"agent": c.agent, "text": c.text, "prompt_tokens": c.prompt_tokens,
                       "new_tokens": c.new_tokens} for c in b.trail] for b in runs]}


def _replay(ctx: SearchContext, question: str, entry: dict) -> list[Beam]:
    """The stored passes as beams, counted as the sampling they stand for."""
    runs = []
    for steps in entry["runs"]:
        beam = Beam(ctx.graph.start(question))
        for step in steps:
            state = beam.state.decide(step["agent"], step["text"])
            cand = Candidate(beam.state, step["agent"], step["text"], state, step["new_tokens"], step["prompt_tokens"])
            beam = Beam(state, beam.score, beam.trail + (cand,))
            ctx.count_samples([[Generation(step["text"], step["prompt_tokens"], step["new_tokens"])]])
            ctx.note_finished([state])
        runs.append(beam)
    if ctx.keys is not None:
        ctx.keys.count += entry["requests"]
    return runs


def sample_passes(ctx: SearchContext, example: Any, k: int) -> SearchStep:
    """k single passes through the team at --sbs_temperature, advanced together; read from the
    context's store when it has them, else sampled (and stored)."""
    s = ctx.settings
    spec = {"passes": k, "temperature": s.sbs_temperature, "top_p": s.top_p, "max_new_tokens": s.max_new_tokens}
    store: SampleStore | None = ctx.samples
    if store is not None:
        entry = store.load(spec, example.idx, example.question)
        if entry is not None:
            return _replay(ctx, example.question, entry)
    before = ctx.keys.count if ctx.keys is not None else 0
    start = Beam(ctx.graph.start(example.question))
    runs = yield from beam_search(ctx, [start] * k, width=k, branching=1, scorer=None,
                                  temperature=s.sbs_temperature)
    if store is not None:
        store.save(spec, example.idx, example.question,
                   _entry(runs, (ctx.keys.count if ctx.keys is not None else 0) - before))
    return runs
