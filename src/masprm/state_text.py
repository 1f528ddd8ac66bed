"""The text a scorer sees for a (partial) trajectory.

Shared by preprocessing, training and inference so that the scorer is always
shown the same shape of text: ``prompt + step_1 + SEP + step_2 + SEP + ...``
with no extra spaces or newlines.
"""

from __future__ import annotations

from typing import Sequence

from masprm.graph import RoutingState

DEFAULT_SEPARATOR = "</step>"
VIEWS = ("full", "local")


class StepText(str):
    """A scorer text that remembers its parts, ``prompt + step_1 + SEP + ...``.

    It is an ordinary string everywhere else; a prm/orm scorer uses the parts
    to tokenise exactly as it was trained (prompt and each step separately).
    """

    def __new__(cls, prompt: str, steps: Sequence[str], sep: str = DEFAULT_SEPARATOR):
        text = super().__new__(cls, prompt + "".join(step + sep for step in steps))
        text.prompt, text.steps, text.sep = prompt, tuple(steps), sep
        return text

    def __reduce__(self):  # pickles (worker processes) with its parts
        return StepText, (self.prompt, self.steps, self.sep)


def join_steps(prompt: str, steps: Sequence[str], sep: str = DEFAULT_SEPARATOR) -> StepText:
    return StepText(prompt, steps, sep)


def full_state_text(state: RoutingState, sep: str = DEFAULT_SEPARATOR) -> str:
    """The routed transcript: question, then each decided agent's output + SEP in topological order."""
    order = sorted(state.outputs, key=state.graph.topo_position.__getitem__)
    return join_steps(state.question, [state.outputs[a] for a in order], sep)


def local_state_text(state: RoutingState, agent: int | None = None, sep: str = DEFAULT_SEPARATOR) -> str:
    """What one agent received plus what it said: ``user_content + output + SEP``.

    With no agent named, the last decided agent (topological order) is used.
    """
    if agent is None and state.outputs:
        agent = max(state.outputs, key=state.graph.topo_position.__getitem__)
    if agent is None:
        return join_steps(state.question, [""], sep)
    user = state.user_content(agent)
    output = state.outputs.get(agent, "")
    if user and output:
        return join_steps(user, [output], sep)  # the prompt/completion split of stage 2's local records
    if output or user:
        return join_steps("", [output or user], sep)
    return join_steps(state.question, [""], sep)


def state_text(state: RoutingState, view: str = "full", agent: int | None = None,
               sep: str = DEFAULT_SEPARATOR) -> str:
    if view == "full":
        return full_state_text(state, sep)
    if view == "local":
        return local_state_text(state, agent, sep)
    raise ValueError(f"unknown view {view!r} (expected one of {', '.join(VIEWS)})")
