"""The model card of a scorer folder: README.md with hub metadata and a snippet that needs no masprm.

    write_model_card("checkpoints/MASPRM-GSM8K-1.5B")              # from its masprm_scorer.json
    write_model_card(folder, hub_model_id="me/masprm-gsm8k")      # the snippet loads it from the hub

The card replaces peft's empty template. Its YAML block says what the hub
indexes (``library_name``, ``base_model`` when the base was a hub id, never a
local path, ``tags``, the ``pipeline_tag``) and what the scorer is: objective,
label scheme, step aggregation, separator, text style, training data (file name,
size, examples) and the held-out metrics. Its snippet loads the scorer with peft
and transformers alone and scores a transcript as ``masprm.models.scorer`` does:
the same tokenisation (``masprm.models.text_encoder.TextEncoder``), the value
tanh(logit) at the last step separator, in fp32. The card is a function of the
metadata only (no paths of this machine, no dates), so one seed gives one file.
Pure Python.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from masprm.checks import looks_like_path
from masprm.io import atomic_write_text
from masprm.scorer_meta import read_scorer_meta
from masprm.state_text import DEFAULT_SEPARATOR

CARD_FILE = "README.md"

OBJECTIVE_TEXT = {
    "ppm": "pairwise Bradley-Terry on preference pairs of sibling messages mined from MAS-MCTS trees "
           "(the MASPRM objective)",
    "prm": "per-step regression of each step's Monte Carlo value in [-1, 1]",
    "orm": "the final outcome (+1 correct, -1 wrong), trained on the last step only (an outcome reward model)",
    "traj": "trajectory-level: the aggregate of the step scores is trained against the final outcome",
}
STYLE_TEXT = {"whole": "the whole text tokenised in one piece", "steps": "the prompt and each step tokenised apart"}
# What a folder trained before label schemes were recorded learned from, per objective.
DEFAULT_LABELS = {"ppm": "pairs", "prm": "mc", "orm": "outcome"}
# Step aggregations the snippet computes; any other recorded one is named in words.
AGGREGATIONS = {"min": "min(values)", "max": "max(values)", "mean": "sum(values) / len(values)",
                "last": "values[-1]"}


def _literal(text: str) -> str:
    """A Python string literal in double quotes."""
    return json.dumps(text, ensure_ascii=False)


def objective_of(meta: dict[str, Any]) -> str:
    return str(meta.get("objective") or meta.get("mode") or "unknown")


def label_scheme_of(meta: dict[str, Any]) -> str:
    return str(meta.get("label_scheme") or DEFAULT_LABELS.get(objective_of(meta), "unknown"))


def hub_base_model(meta: dict[str, Any]) -> str | None:
    """The base model when it was a hub id; None for a local folder (whose path means nothing elsewhere)."""
    base = meta.get("base_model_id")
    return base if isinstance(base, str) and base and not looks_like_path(base) else None


def card_metadata(meta: dict[str, Any], *, merged: bool = False) -> dict[str, Any]:
    """The YAML block: the hub's own keys first, then what the scorer is."""
    objective = objective_of(meta)
    data = meta.get("data") or {}
    out: dict[str, Any] = {"library_name": "transformers" if merged or not meta.get("lora", True) else "peft"}
    if hub_base_model(meta):
        out["base_model"] = hub_base_model(meta)
    out["pipeline_tag"] = "token-classification"
    out["tags"] = ["masprm", "process-reward-model", "reward-model", "multi-agent", objective] + \
        (["lora"] if meta.get("lora", True) and not merged else [])
    out["objective"] = objective
    out["label_scheme"] = label_scheme_of(meta)
    if meta.get("step_agg"):
        out["step_agg"] = meta["step_agg"]
    out["step_separator"] = meta.get("separator", DEFAULT_SEPARATOR)
    out["text_style"] = meta["text_style"]
    out["max_length"] = meta.get("max_length")
    out["training_data"] = {"file": Path(str(data.get("path") or "unknown")).name, "bytes": data.get("bytes"),
                            "train_examples": meta.get("train_examples"), "eval_examples": meta.get("eval_examples")}
    out["eval_metrics"] = dict(meta.get("eval_metrics") or {})
    return out


# --------------------------------------------------------------------------- the snippet


def _token_ids_code(meta: dict[str, Any]) -> str:
    """The tokenisation of masprm.models.text_encoder.TextEncoder, for this folder's style and limits."""
    sep = meta.get("separator", DEFAULT_SEPARATOR)
    max_length = int(meta.get("max_length") or 2048)
    if meta["text_style"] == "whole":
        return (f"def token_ids(prompt, steps):\n"
                f"    \"\"\"The whole transcript in one piece, cut from the left to {max_length} tokens.\"\"\"\n"
                f"    text = prompt + \"\".join(step + {_literal(sep)} for step in steps)\n"
                f"    tokenizer.truncation_side = \"left\"\n"
                f"    return tokenizer(text, add_special_tokens=True, truncation=True, "
                f"max_length={max_length})[\"input_ids\"]\n")
    prompt_cut = int(meta.get("max_prompt_length") or 0)
    cut_line = (f"    ids = ids[-{prompt_cut}:]  # the prompt keeps its last {prompt_cut} tokens\n"
                if prompt_cut > 0 else "")
    return ("def token_ids(prompt, steps):\n"
            "    \"\"\"The prompt and each step tokenised apart, a separator token after every step.\"\"\"\n"
            "    ids = tokenizer(prompt, add_special_tokens=False)[\"input_ids\"] if prompt else []\n"
            "    if tokenizer.bos_token_id is not None:\n"
            "        ids = [tokenizer.bos_token_id] + ids\n"
            f"{cut_line}"
            "    for step in steps:\n"
            "        ids = ids + tokenizer(step, add_special_tokens=False)[\"input_ids\"] + [SEP_ID]\n"
            f"    return ids[-{max_length}:]\n")


def _score_code(meta: dict[str, Any]) -> str:
    agg = meta.get("step_agg")
    if objective_of(meta) != "traj" or not agg:
        return ("def score(prompt, steps):\n"
                "    \"\"\"The transcript's value in [-1, 1]: the step value at its last separator.\"\"\"\n"
                "    return step_values(prompt, steps)[-1]\n")
    if agg in AGGREGATIONS:
        return ("def score(prompt, steps):\n"
                f"    \"\"\"The transcript's value: {agg} over its step values (the scorer's step_agg).\"\"\"\n"
                "    values = step_values(prompt, steps)\n"
                f"    return {AGGREGATIONS[agg]}\n")
    return ("def score(prompt, steps):\n"
            f"    \"\"\"The step values; the transcript's value is their {agg} (the scorer's step_agg).\"\"\"\n"
            "    return step_values(prompt, steps)\n")


def card_snippet(meta: dict[str, Any], *, scorer_ref: str | None = None, merged: bool = False) -> str:
    """Python that loads this scorer with peft + transformers and defines ``score(prompt, steps)``."""
    sep = meta.get("separator", DEFAULT_SEPARATOR)
    where = f"{_literal(scorer_ref)}  # its hub id; or the folder's path" if scorer_ref else \
        "\".\"  # this folder (run from inside it), or its path or hub id"
    sep_id = meta.get("separator_id")
    sep_line = f"SEP_ID = {sep_id}  # the token of {_literal(sep)}" if isinstance(sep_id, int) else \
        f"SEP_ID = tokenizer.convert_tokens_to_ids({_literal(sep)})"
    if merged or not meta.get("lora", True):
        imports = "from transformers import AutoModelForTokenClassification, AutoTokenizer\n"
        load = "model = AutoModelForTokenClassification.from_pretrained(SCORER, num_labels=1, dtype=torch.float32)\n"
    else:
        imports = ("from peft import AutoPeftModelForTokenClassification\n"
                   "from transformers import AutoTokenizer\n")
        load = ("# the base model named in adapter_config.json, its embeddings resized for the separator token\n"
                "model = AutoPeftModelForTokenClassification.from_pretrained(SCORER, num_labels=1, "
                "dtype=torch.float32)\n")
    return ("import math\n\n"
            "import torch\n"
            f"{imports}\n"
            f"SCORER = {where}\n"
            "tokenizer = AutoTokenizer.from_pretrained(SCORER)\n"
            f"{load}"
            "model.eval()\n"
            f"{sep_line}\n\n\n"
            f"{_token_ids_code(meta)}\n\n"
            "@torch.no_grad()\n"
            "def step_values(prompt, steps):\n"
            "    \"\"\"tanh of the head's logit at every step separator (the last token if there is none).\"\"\"\n"
            "    ids = token_ids(prompt, steps)\n"
            "    logits = model(input_ids=torch.tensor([ids])).logits[0, :, 0]\n"
            "    at = [i for i, token in enumerate(ids) if token == SEP_ID] or [len(ids) - 1]\n"
            "    return [math.tanh(logits[i].item()) for i in at]\n\n\n"
            f"{_score_code(meta)}\n\n"
            "print(score(\"Tom has 3 apples and buys 4 more. How many apples does he have?\",\n"
            "            [\"3 + 4 = 7.\", \"The answer is 7.\"]))\n")


# --------------------------------------------------------------------------- the card


def _metrics_table(metrics: dict[str, Any]) -> str:
    if not metrics:
        return "No held-out evaluation was recorded.\n"
    rows = "".join(f"| {name} | {value:.6g} |\n" if isinstance(value, (int, float)) else f"| {name} | {value} |\n"
                   for name, value in sorted(metrics.items()))
    return "| metric | value |\n| --- | --- |\n" + rows


def _masprm_snippet(hub_model_id: str | None) -> str:
    if not hub_model_id:
        return "from masprm.models.scorer import load_scorer\n\nscorer = load_scorer(\"path/to/this/folder\")\n"
    return ("from huggingface_hub import snapshot_download\nfrom masprm.models.scorer import load_scorer\n\n"
            f"scorer = load_scorer(snapshot_download({_literal(hub_model_id)}))\n")


def model_card(meta: dict[str, Any], *, hub_model_id: str | None = None, merged: bool = False) -> str:
    """The README.md text of a scorer folder described by ``meta`` (its masprm_scorer.json)."""
    head = card_metadata(meta, merged=merged)
    objective, sep = head["objective"], head["step_separator"]
    base = hub_base_model(meta) or f"a local model folder ({Path(str(meta.get('base_model_id'))).name})"
    data = head["training_data"]
    kind = ("a standalone transformers model (the LoRA adapter merged into its base)" if merged else
            "a LoRA adapter (peft)" if meta.get("lora", True) else "a full fine-tune (transformers)")
    value = (f"**{meta['step_agg']} over the step values** (its `step_agg`; a partial transcript gets the same "
             "aggregation over its steps so far)" if objective == "traj" and meta.get("step_agg") else
             "the step value at the **last** separator")
    local_base = "" if hub_base_model(meta) or merged or not meta.get("lora", True) else (
        "\nThe adapter names its base model by the local path it was trained from, which exists only on that "
        "machine. Elsewhere, load the base yourself: `AutoModelForTokenClassification.from_pretrained(BASE, "
        "num_labels=1, dtype=torch.float32)`, then `model.resize_token_embeddings(len(tokenizer))` and "
        "`peft.PeftModel.from_pretrained(model, SCORER)`.\n")
    title = hub_model_id.split("/")[-1] if hub_model_id else f"MASPRM scorer ({objective})"
    return (
        "---\n" + yaml.safe_dump(head, sort_keys=False, allow_unicode=True) + "---\n\n"
        f"# {title}\n\n"
        f"A step scorer for multi-agent transcripts, trained with masprm (stage 3): "
        f"{kind} for token classification with one output on {base}.\n\n"
        "A transcript is the question followed by each agent's message, every message ended by the step separator "
        f"`{sep}`: `question + message_1 + {sep} + message_2 + {sep} + ...`. The value of a step is tanh of the "
        f"head's logit at that step's separator, in [-1, 1]; the value of a transcript is {value}.\n\n"
        f"- objective: `{objective}`: {OBJECTIVE_TEXT.get(objective, 'see the masprm documentation')}\n"
        f"- label scheme: `{head['label_scheme']}`\n"
        f"- text style: `{head['text_style']}` ({STYLE_TEXT.get(head['text_style'], 'see masprm')}), "
        f"at most {head['max_length']} tokens (the start is cut first)\n"
        f"- training data: `{data['file']}` ({data['bytes'] if data['bytes'] is not None else 'unknown'} bytes), "
        f"{data['train_examples']} training and {data['eval_examples']} held-out examples\n\n"
        "## Held-out metrics\n\n" + _metrics_table(head["eval_metrics"]) + "\n"
        "## Use with transformers and peft\n\n"
        "Scores as masprm does on a CPU (fp32). On a GPU masprm loads a scorer's base in 4-bit NF4 by default "
        "(`--scorer_precision`), so its values there agree with these only approximately.\n\n"
        "```python\n" + card_snippet(meta, scorer_ref=hub_model_id, merged=merged) + "```\n"
        f"{local_base}\n"
        "## Use with masprm\n\n"
        "```python\n" + _masprm_snippet(hub_model_id) + "```\n\n"
        "or pass the folder to stage 4 as `--prm_dir` (`--orm_dir` for an outcome scorer).\n"
    )


def write_model_card(folder: str | Path, meta: dict[str, Any] | None = None, *, hub_model_id: str | None = None,
                     merged: bool = False) -> Path:
    """Write ``folder/README.md`` (atomically) from ``meta``, by default the folder's masprm_scorer.json."""
    folder = Path(folder)
    meta = read_scorer_meta(folder) if meta is None else meta
    path = folder / CARD_FILE
    atomic_write_text(path, model_card(meta, hub_model_id=hub_model_id, merged=merged))
    return path
