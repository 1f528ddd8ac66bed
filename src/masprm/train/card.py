"""The model card of a scorer folder: README.md with hub metadata and a snippet that needs no masprm.

    write_model_card("checkpoints/MASPRM-GSM8K-1.5B")              # from its masprm_scorer.json
    write_model_card(folder, hub_model_id="me/masprm-gsm8k")      # the snippet loads it from the hub

The card replaces peft's empty template. Its YAML block, built with
``huggingface_hub.ModelCardData``, says what the hub indexes (``library_name``,
``license``, ``base_model`` when the base was a hub id, never a local path,
``datasets`` when the stage-2 file names a hub dataset, ``tags``, the held-out
metrics as ``model-index`` results; no ``pipeline_tag``, see ``card_metadata``)
and what the scorer is: objective, label scheme, step aggregation, separator,
text style, training data (file name, size, examples). Its snippet loads the scorer with peft
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
from masprm.scorer_meta import logit_scale, read_scorer_meta
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


def base_license(model_id: str | None) -> str | None:
    """The `license` of the base model's own card: in its local folder, or in the hub cache (never fetched)."""
    if not model_id:
        return None
    card = Path(model_id).expanduser() / CARD_FILE
    if not card.is_file() and not looks_like_path(model_id):
        try:
            from huggingface_hub import try_to_load_from_cache

            cached = try_to_load_from_cache(model_id, CARD_FILE)
        except Exception:   # noqa: BLE001 - an id the cache cannot hold: no license known
            cached = None
        card = Path(cached) if isinstance(cached, str) else card
    try:
        text = card.read_text(encoding="utf-8")
        head = yaml.safe_load(text.split("---", 2)[1]) if text.startswith("---") else None
    except (OSError, UnicodeDecodeError, IndexError, yaml.YAMLError):
        return None
    license_ = head.get("license") if isinstance(head, dict) else None
    return license_ if isinstance(license_, str) and license_ else None


def hub_datasets(meta: dict[str, Any]) -> list[str]:
    """The hub dataset the stage-2 file came from, when its name says (``ppm_pairs_<dataset>_res_<split>...``)."""
    from masprm.data import DATASETS

    name = Path(str((meta.get("data") or {}).get("path") or "")).name
    run = name.split("_pairs_", 1)[-1].split("_samples_", 1)[-1]
    dataset = run.split("_res_", 1)[0] if "_res_" in run else None
    hub_id = getattr(DATASETS.get(dataset), "hub_id", None) if dataset in DATASETS else None
    return [hub_id] if isinstance(hub_id, str) else []


def _eval_results(meta: dict[str, Any], data_file: str) -> list:
    """The held-out metrics as model-index results (one per metric) on the held-out split of the data file."""
    from huggingface_hub import EvalResult

    metrics = {k: v for k, v in sorted((meta.get("eval_metrics") or {}).items())
               if isinstance(v, (int, float)) and not isinstance(v, bool) and k != "epoch"}
    objective = objective_of(meta)
    return [EvalResult(task_type="reward-modeling", task_name=f"step scoring ({objective})",
                       dataset_type=data_file, dataset_name=f"held-out records of {data_file}",
                       dataset_split="eval", metric_type=name.removeprefix("eval_"), metric_name=name,
                       metric_value=value)
            for name, value in metrics.items()]


def card_metadata(meta: dict[str, Any], *, merged: bool = False, model_name: str | None = None) -> dict[str, Any]:
    """The YAML block (huggingface_hub's ModelCardData): the hub's own keys, then what the scorer is.

    No ``pipeline_tag``: the hub's token-classification widget and ``pipeline(...)`` take a softmax
    over the head's outputs, which for this one-output head is 1.0 at every token; ``inference:
    false`` keeps the hub from offering that widget.
    """
    from huggingface_hub import ModelCardData

    objective = objective_of(meta)
    data = meta.get("data") or {}
    data_file = Path(str(data.get("path") or "unknown")).name
    license_ = meta.get("base_license")
    card = ModelCardData(
        library_name="transformers" if merged or not meta.get("lora", True) else "peft",
        license=license_ or "other",
        license_name=None if license_ else "same-as-base-model",
        base_model=hub_base_model(meta), datasets=hub_datasets(meta) or None,
        tags=["masprm", "process-reward-model", "reward-model", "multi-agent", objective]
        + (["lora"] if meta.get("lora", True) and not merged else []),
        model_name=model_name or f"masprm-{objective}-scorer", eval_results=_eval_results(meta, data_file) or None,
        inference=False, objective=objective, label_scheme=label_scheme_of(meta), step_agg=meta.get("step_agg"),
        step_separator=meta.get("separator", DEFAULT_SEPARATOR), text_style=meta["text_style"],
        max_length=meta.get("max_length"),
        training_data={"file": data_file, "bytes": data.get("bytes"), "train_examples": meta.get("train_examples"),
                       "eval_examples": meta.get("eval_examples")})
    return card.to_dict()


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


def _scale_code(meta: dict[str, Any]) -> str:
    scale = logit_scale(meta)
    return "" if scale == 1.0 else f"{scale:g} * "


def _read_out_text(meta: dict[str, Any]) -> str:
    """How the head's logit z becomes a step value (masprm.scorer_meta.logit_scale)."""
    return "tanh of the head's logit" if logit_scale(meta) == 1.0 else \
        f"tanh({logit_scale(meta):g} * the head's logit) (2 sigmoid(logit) - 1: the logit was trained with BCE)"


# A local base is named by its path as training was given it, usually relative to the checkout it ran in
# (artifacts/toy/policy): the snippet looks for it from where it runs, then from the scorer folder and each
# folder above it, so the card's code runs as written from inside a scorer folder of that checkout.
LOCAL_BASE_CODE = (
    "# a base named by a path relative to the checkout it was trained in (artifacts/toy/policy): found from here,\n"
    "# else from the scorer folder or the first folder above it that holds that path\n"
    "if not os.path.isabs(BASE) and not os.path.isdir(BASE):\n"
    "    above = os.path.abspath(SCORER)\n"
    "    while not os.path.isdir(os.path.join(above, BASE)) and os.path.dirname(above) != above:\n"
    "        above = os.path.dirname(above)\n"
    "    BASE = os.path.join(above, BASE) if os.path.isdir(os.path.join(above, BASE)) else BASE\n")


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
        imports = ("from peft import PeftConfig, PeftModel\n"
                   "from transformers import AutoModelForTokenClassification, AutoTokenizer\n")
        load = ("# the base model named in adapter_config.json, its embeddings resized to the adapter's stored size\n"
                "# (training resized them to the tokenizer's length) before the adapter loads: also offline\n"
                "BASE = PeftConfig.from_pretrained(SCORER).base_model_name_or_path\n"
                f"{'' if hub_base_model(meta) else LOCAL_BASE_CODE}"
                "model = AutoModelForTokenClassification.from_pretrained(BASE, num_labels=1, dtype=torch.float32)\n"
                "model.resize_token_embeddings(len(tokenizer))\n"
                "model = PeftModel.from_pretrained(model, SCORER)\n")
    return ("import math\n"
            "import os\n\n"
            "import torch\n"
            "from huggingface_hub import snapshot_download\n"
            f"{imports}\n"
            f"SCORER = {where}\n"
            "# a hub id is read from its downloaded copy (the hub cache, so HF_HUB_OFFLINE=1 works once it is there)\n"
            "SCORER = SCORER if os.path.isdir(SCORER) else snapshot_download(SCORER)\n"
            "tokenizer = AutoTokenizer.from_pretrained(SCORER)\n"
            f"{load}"
            "model.eval()\n"
            f"{sep_line}\n\n\n"
            f"{_token_ids_code(meta)}\n\n"
            "@torch.no_grad()\n"
            "def step_values(prompt, steps):\n"
            f"    \"\"\"{_read_out_text(meta)} at every step separator (the last token if there is none).\"\"\"\n"
            "    ids = token_ids(prompt, steps)\n"
            "    logits = model(input_ids=torch.tensor([ids])).logits[0, :, 0]\n"
            "    at = [i for i, token in enumerate(ids) if token == SEP_ID] or [len(ids) - 1]\n"
            f"    return [math.tanh({_scale_code(meta)}logits[i].item()) for i in at]\n\n\n"
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


def _license_text(head: dict[str, Any]) -> str:
    if head.get("license") != "other":
        return f"`{head.get('license')}`, the base model's"
    return "the base model's (not recorded where this scorer was trained)"


def _masprm_snippet(hub_model_id: str | None) -> str:
    if not hub_model_id:
        return "from masprm.models.scorer import load_scorer\n\nscorer = load_scorer(\"path/to/this/folder\")\n"
    return ("from huggingface_hub import snapshot_download\nfrom masprm.models.scorer import load_scorer\n\n"
            f"scorer = load_scorer(snapshot_download({_literal(hub_model_id)}))\n")


def model_card(meta: dict[str, Any], *, hub_model_id: str | None = None, merged: bool = False) -> str:
    """The README.md text of a scorer folder described by ``meta`` (its masprm_scorer.json)."""
    title = hub_model_id.split("/")[-1] if hub_model_id else f"MASPRM scorer ({objective_of(meta)})"
    head = card_metadata(meta, merged=merged, model_name=title)
    objective, sep = head["objective"], head["step_separator"]
    base = hub_base_model(meta) or f"a local model folder ({Path(str(meta.get('base_model_id'))).name})"
    data = head["training_data"]
    kind = ("a standalone transformers model (the LoRA adapter merged into its base)" if merged else
            "a LoRA adapter (peft)" if meta.get("lora", True) else "a full fine-tune (transformers)")
    value = (f"**{meta['step_agg']} over the step values** (its `step_agg`; a partial transcript gets the same "
             "aggregation over its steps so far)" if objective == "traj" and meta.get("step_agg") else
             "the step value at the **last** separator")
    local_base = "" if hub_base_model(meta) or merged or not meta.get("lora", True) else (
        "\nThe adapter names its base model by the local path it was trained from; the code finds a relative "
        "path such as `artifacts/toy/policy` from where it runs, or from this folder "
        "or a folder above it, so it runs as written from inside this folder in the checkout it was trained in. "
        "Elsewhere, set `BASE` to your copy of the base, or load it yourself: "
        "`AutoModelForTokenClassification.from_pretrained(BASE, num_labels=1, dtype=torch.float32)`, then "
        "`model.resize_token_embeddings(len(tokenizer))` and `peft.PeftModel.from_pretrained(model, SCORER)`.\n")
    return (
        "---\n" + yaml.safe_dump(head, sort_keys=False, allow_unicode=True) + "---\n\n"
        f"# {title}\n\n"
        f"A step scorer for multi-agent transcripts, trained with masprm (stage 3): "
        f"{kind} for token classification with one output on {base}.\n\n"
        "A transcript is the question followed by each agent's message, every message ended by the step separator "
        f"`{sep}`: `question + message_1 + {sep} + message_2 + {sep} + ...`. The value of a step is "
        f"{_read_out_text(meta)} at that step's separator, in [-1, 1]; the value of a transcript is {value}.\n\n"
        f"- objective: `{objective}`: {OBJECTIVE_TEXT.get(objective, 'see the masprm documentation')}\n"
        f"- label scheme: `{head['label_scheme']}`\n"
        f"- text style: `{head['text_style']}` ({STYLE_TEXT.get(head['text_style'], 'see masprm')}), "
        f"at most {head['max_length']} tokens (the start is cut first)\n"
        f"- training data: `{data['file']}` ({data['bytes'] if data['bytes'] is not None else 'unknown'} bytes), "
        f"{data['train_examples']} training and {data['eval_examples']} held-out examples\n"
        f"- license: {_license_text(head)}\n\n"
        "The hub's token-classification widget and `pipeline(...)` would show 1.0 at every token (a softmax over "
        "the head's single output), so the card names no `pipeline_tag`; score with the code below.\n\n"
        "## Held-out metrics\n\n" + _metrics_table(dict(meta.get("eval_metrics") or {})) + "\n"
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
