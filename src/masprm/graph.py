"""The MAS communication graph: config loading, validation and routing.

Agents are numbered by their position in the config; ``QUESTION`` (-1) is the
root that delivers the question. An edge ``src -> dst`` delivers the source's
output to the destination when its condition fires on that output. An agent
runs once every declared parent has delivered to it; agents whose parents
never deliver are skipped, so trajectories can have different lengths.

A config file is checked against the schema below (``CONFIG_KEYS``,
``AGENT_KEYS``, ``EDGE_KEYS``): an unknown key is named with the closest known
one, a duplicate key or an alias bomb is refused when the YAML is read
(``masprm.io.load_yaml``), a ``max_new_tokens`` beyond ``MAX_NEW_TOKENS_LIMIT``
is refused, and in a static team every agent needs an incoming edge.

Pure Python: importing this module must not import torch.
"""

from __future__ import annotations

import difflib
import heapq
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping

from masprm.checks import read_utf8
from masprm.errors import ConfigError, quoted
from masprm.io import load_yaml

QUESTION = -1
DEFAULT_MAX_NEW_TOKENS = 512
MAX_NEW_TOKENS_LIMIT = 131072   # longer than any supported model's context: a larger cap is a typo
CONFIG_KEYS = ("agents", "edges", "handoff")
AGENT_KEYS = ("name", "system_prompt", "max_new_tokens")
EDGE_KEYS = ("src", "dst", "condition")
HANDOFF_KEYS = ("initial_role", "fixed_schedule", "min_turns", "max_turns")   # read by masprm.handoff.team


def check_keys(mapping: Mapping, known: Iterable[str], where: str) -> None:
    """Every key of `mapping` is one of `known`; an unknown one is a ConfigError naming the closest known key."""
    known = tuple(known)
    for key in mapping:
        if key in known:
            continue
        close = difflib.get_close_matches(str(key), known, n=1, cutoff=0.6)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ConfigError(f"{where}: unknown key {quoted(key)}{hint}; known keys: {', '.join(known)}")


# --------------------------------------------------------------------------- conditions

_CONDITION_KINDS = ("contains", "not_contains", "regex", "not_regex")


@dataclass(frozen=True)
class EdgeRule:
    """An edge's rule for delivering a message (its `condition` in the MAS config): always, or when the
    sender's text passes a case-insensitive substring test or a regex test (contains, not_contains, regex,
    not_regex)."""

    kind: str = "always"
    arg: str = ""

    def fires(self, text: str) -> bool:
        if self.kind == "always":
            return True
        if self.kind == "contains":
            return self.arg.lower() in text.lower()
        if self.kind == "not_contains":
            return self.arg.lower() not in text.lower()
        found = re.search(self.arg, text) is not None
        return found if self.kind == "regex" else not found

    def __str__(self) -> str:
        return "always" if self.kind == "always" else f"{self.kind}:{self.arg}"


def parse_edge_rule(raw: Any, where: str) -> EdgeRule:
    if raw is None:
        return EdgeRule()
    if not isinstance(raw, str):
        raise ConfigError(f"{where}: condition must be a string, got {type(raw).__name__}")
    raw = raw.strip()
    if raw in ("", "always"):
        return EdgeRule()
    if ":" not in raw:
        raise ConfigError(f"{where}: condition {quoted(raw)} is missing ':' (expected e.g. 'contains:TEXT')")
    kind, arg = raw.split(":", 1)
    kind = kind.strip()
    if kind not in _CONDITION_KINDS:
        raise ConfigError(
            f"{where}: unknown condition {quoted(kind)} (expected one of always, {', '.join(_CONDITION_KINDS)})"
        )
    if kind in ("regex", "not_regex"):
        try:
            re.compile(arg)
        except re.error as err:
            raise ConfigError(f"{where}: invalid regex {quoted(arg)} ({err})") from None
    return EdgeRule(kind, arg)


# --------------------------------------------------------------------------- the graph


@dataclass(frozen=True)
class Agent:
    index: int
    name: str
    system_prompt: str
    max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS


@dataclass(frozen=True)
class Edge:
    src: int
    dst: int
    condition: EdgeRule = EdgeRule()


class MASGraph:
    """Agents, edges and the derived routing structure of one MAS config."""

    def __init__(self, agents: list[Agent], edges: list[Edge], *, handoff: dict | None = None,
                 source: str = "<config>"):
        self.source = source
        self.agents = tuple(agents)
        self.edges = tuple(edges)
        self.handoff = handoff
        n = len(self.agents)
        if n == 0:
            raise ConfigError(f"{source}: 'agents' is empty")
        seen: set[tuple[int, int]] = set()
        for e in self.edges:
            where = f"{source}: edge [{e.src}, {e.dst}]"
            if not 0 <= e.dst < n:
                raise ConfigError(f"{where}: target {e.dst} is outside 0..{n - 1}")
            if not -1 <= e.src < n:
                raise ConfigError(f"{where}: source {e.src} is outside -1..{n - 1}")
            if (e.src, e.dst) in seen:
                raise ConfigError(f"{where}: duplicate edge")
            if e.src == QUESTION and e.condition.kind != "always":
                raise ConfigError(f"{where}: a question edge (from -1) cannot have a condition "
                                  f"({e.condition}): the question always reaches every child of -1")
            seen.add((e.src, e.dst))
        self._parents = {a: tuple(sorted(e.src for e in self.edges if e.dst == a)) for a in range(n)}
        self._children = {a: tuple(sorted(e.dst for e in self.edges if e.src == a)) for a in range(-1, n)}
        self._out_edges = {a: tuple(sorted((e for e in self.edges if e.src == a), key=lambda e: e.dst))
                           for a in range(-1, n)}
        self.topo_order = self._topological_order()
        self.topo_position = {a: i for i, a in enumerate(self.topo_order)}
        self.sinks = tuple(a for a in range(n) if not self._children[a])

    @property
    def agent_names(self) -> list[str]:
        """The agents' names by index (what trees and their pictures show for an agent index)."""
        return [agent.name for agent in self.agents]

    def _topological_order(self) -> tuple[int, ...]:
        """Kahn's algorithm, ignoring question edges, smallest ready index first."""
        n = len(self.agents)
        indegree = {a: sum(1 for p in self._parents[a] if p != QUESTION) for a in range(n)}
        ready = [a for a in range(n) if indegree[a] == 0]
        heapq.heapify(ready)
        order: list[int] = []
        while ready:
            a = heapq.heappop(ready)
            order.append(a)
            for c in self._children[a]:
                indegree[c] -= 1
                if indegree[c] == 0:
                    heapq.heappush(ready, c)
        if len(order) < n:
            stuck = sorted(a for a in range(n) if a not in order)
            names = ", ".join(f"{a} ({self.agents[a].name})" for a in stuck)
            raise ConfigError(f"{self.source}: cycle among agents {names}")
        return tuple(order)

    # -- queries
    @property
    def n_agents(self) -> int:
        return len(self.agents)

    def parents(self, agent: int) -> tuple[int, ...]:
        return self._parents[agent]

    def children(self, agent: int) -> tuple[int, ...]:
        return self._children[agent]

    def out_edges(self, agent: int) -> tuple[Edge, ...]:
        return self._out_edges[agent]

    def start(self, question: str) -> "RoutingState":
        """The empty trajectory: the question delivered to every child of the root."""
        inbox: dict[int, dict[int, str]] = {a: {} for a in range(self.n_agents)}
        for e in self._out_edges[QUESTION]:
            inbox[e.dst][QUESTION] = question  # unconditionally (conditions on these edges are refused)
        return RoutingState(self, question, {}, inbox)

    def replay(self, question: str, decisions: list[tuple[int, str]]) -> "RoutingState":
        state = self.start(question)
        for agent, text in decisions:
            state = state.decide(agent, text)
        return state

    # -- construction
    @classmethod
    def from_dict(cls, data: Any, source: str = "<config>") -> "MASGraph":
        if not isinstance(data, Mapping):
            raise ConfigError(f"{source}: expected a mapping with 'agents' and 'edges'")
        check_keys(data, CONFIG_KEYS, source)
        raw_agents = data.get("agents")
        if not raw_agents:
            raise ConfigError(f"{source}: 'agents' is empty or missing")
        if not isinstance(raw_agents, list):
            raise ConfigError(f"{source}: 'agents' must be a list")
        agents = []
        for i, ra in enumerate(raw_agents):
            where = f"{source}: agent {i}"
            if not isinstance(ra, Mapping):
                raise ConfigError(f"{where}: expected a mapping with name and system_prompt")
            check_keys(ra, AGENT_KEYS, where)
            name = ra.get("name")
            if not isinstance(name, str) or not name.strip():
                raise ConfigError(f"{where}: missing 'name'")
            prompt = ra.get("system_prompt", "")
            if not isinstance(prompt, str):
                raise ConfigError(f"{where} ({name}): 'system_prompt' must be a string")
            mnt = ra.get("max_new_tokens", DEFAULT_MAX_NEW_TOKENS)
            if not isinstance(mnt, int) or isinstance(mnt, bool) or not 1 <= mnt <= MAX_NEW_TOKENS_LIMIT:
                raise ConfigError(f"{where} ({name}): 'max_new_tokens' must be an integer in "
                                  f"1..{MAX_NEW_TOKENS_LIMIT}, got {quoted(mnt)}")
            agents.append(Agent(i, name.strip(), prompt, mnt))  # as written: a YAML | block keeps its newline
        raw_edges = data.get("edges") or []
        if not isinstance(raw_edges, list):
            raise ConfigError(f"{source}: 'edges' must be a list")
        edges = [_parse_edge(re_, k, source) for k, re_ in enumerate(raw_edges)]
        handoff = data.get("handoff")
        if handoff is not None and not isinstance(handoff, Mapping):
            raise ConfigError(f"{source}: 'handoff' must be a mapping")
        check_keys(handoff or {}, HANDOFF_KEYS, f"{source}: handoff")
        return cls(agents, edges, handoff=dict(handoff) if handoff else None, source=source)


def _parse_edge(raw: Any, k: int, source: str) -> Edge:
    if isinstance(raw, Mapping):
        check_keys(raw, EDGE_KEYS, f"{source}: edge #{k}")
        src, dst, cond = raw.get("src"), raw.get("dst"), raw.get("condition")
    elif isinstance(raw, (list, tuple)) and len(raw) in (2, 3):
        src, dst = raw[0], raw[1]
        cond = raw[2] if len(raw) == 3 else None
    else:
        raise ConfigError(f"{source}: edge #{k} {quoted(raw)}: expected [src, dst] or [src, dst, condition]")
    for v in (src, dst):
        if not isinstance(v, int) or isinstance(v, bool):
            raise ConfigError(f"{source}: edge #{k} {quoted(raw)}: src and dst must be integers")
    return Edge(src, dst, parse_edge_rule(cond, f"{source}: edge [{src}, {dst}]"))


SHIPPED_CONFIGS = Path(__file__).resolve().parent / "configs"   # configs/ of a checkout links here


def shipped_config_names() -> list[str]:
    return sorted(p.stem for p in SHIPPED_CONFIGS.glob("*.yaml"))


def resolve_config_path(value: str | Path) -> Path:
    """A MAS config named by its path or by a shipped config's name (``gsm8k``, ``toy``).

    An existing file is used as given. Otherwise a bare name, or the
    README's ``configs/<name>.yaml`` from a folder that has no configs/ (an
    installed package), is the package's own copy of that config.
    """
    path = Path(value)
    if path.is_file():
        return path
    name = path.name.removesuffix(".yaml").removesuffix(".yml")
    shipped = SHIPPED_CONFIGS / f"{name}.yaml"
    if (len(path.parts) == 1 or path.parent == Path("configs")) and shipped.is_file():
        return shipped
    raise ConfigError(f"{path}: MAS config not found (give a path, or a shipped config: "
                      f"{', '.join(shipped_config_names())})")


def load_mas_config(path: str | Path) -> MASGraph:
    path = resolve_config_path(path)
    data = load_yaml(read_utf8(path, "MAS config"), path)
    graph = MASGraph.from_dict(data, source=str(path))
    if graph.handoff is None and not graph.children(QUESTION):
        # A static team in which every agent would answer without ever seeing the question.
        raise ConfigError(f"{path}: no agent receives the question (no edge from -1)")
    if graph.handoff is None:
        # An agent nobody delivers to would run on an empty message.
        orphans = [f"{a.index} ({a.name})" for a in graph.agents if not graph.parents(a.index)]
        if orphans:
            raise ConfigError(f"{path}: agent {', '.join(orphans)} has no incoming edge, so it would run on an "
                              "empty message; add an edge to it (from -1 for the question)")
    return graph


# --------------------------------------------------------------------------- routing state


class RoutingState:
    """A partial trajectory: which agents decided what, and each agent's inbox.

    Immutable in use: ``decide`` returns a new state and copies only the
    inboxes it touches, so a search tree can hold one state per node without
    replaying the graph.
    """

    __slots__ = ("graph", "question", "outputs", "inbox")

    def __init__(self, graph: MASGraph, question: str, outputs: dict[int, str],
                 inbox: dict[int, dict[int, str]]):
        self.graph = graph
        self.question = question
        self.outputs = outputs  # agent -> output, in decision (= topological) order
        self.inbox = inbox      # agent -> {parent -> delivered text}

    def decide(self, agent: int, text: str) -> "RoutingState":
        if agent in self.outputs:
            raise ValueError(f"agent {agent} has already decided")
        outputs = dict(self.outputs)
        outputs[agent] = text
        inbox = dict(self.inbox)
        for e in self.graph.out_edges(agent):
            if e.condition.fires(text):
                inbox[e.dst] = {**inbox[e.dst], agent: text}
        return RoutingState(self.graph, self.question, outputs, inbox)

    def is_runnable(self, agent: int) -> bool:
        if agent in self.outputs:
            return False
        got = self.inbox[agent]
        return all(p in got for p in self.graph.parents(agent))

    def next_runnable(self) -> int | None:
        for a in self.graph.topo_order:
            if self.is_runnable(a):
                return a
        return None

    @property
    def is_terminal(self) -> bool:
        return self.next_runnable() is None

    @property
    def decided(self) -> list[int]:
        return list(self.outputs)

    def steps(self) -> list[str]:
        return list(self.outputs.values())

    def user_content(self, agent: int) -> str:
        got = self.inbox[agent]
        return "\n\n".join(got[p] for p in sorted(got)).strip()

    def messages(self, agent: int) -> list[dict[str, str]]:
        return [
            {"role": "system", "content": self.graph.agents[agent].system_prompt},
            {"role": "user", "content": self.user_content(agent)},
        ]

    def final_answer(self) -> str:
        produced = [a for a in self.graph.sinks if a in self.outputs]
        if len(produced) == 1:
            return self.outputs[produced[0]]
        if produced:
            return "\n\n".join(f"[agent {a}] {self.outputs[a]}" for a in produced)
        if self.outputs:
            last = max(self.outputs, key=self.graph.topo_position.__getitem__)
            return self.outputs[last]
        return self.question
