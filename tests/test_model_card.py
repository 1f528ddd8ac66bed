"""The scorer model card: hub metadata from masprm_scorer.json, and a snippet that tokenises as masprm does.

The snippet's loading and scoring against a trained scorer run in test_scorer_sharing.py (slow).
"""

from __future__ import annotations

import re

import pytest
import yaml

from masprm.models.text_encoder import TextEncoder
from masprm.models.token_scorer import separator_token_id
from masprm.train.card import card_snippet, model_card, write_model_card

PPM_META = {"mode": "ppm", "separator": "</step>", "base_model_id": "Qwen/Qwen2.5-1.5B-Instruct",
            "data": {"path": "results/ppm_pairs_gsm8k_res_train.jsonl", "identity": "abc", "bytes": 12345},
            "max_length": 2048, "max_prompt_length": 768, "text_style": "whole", "lora": True,
            "status": "completed", "separator_id": 151665, "train_examples": 96, "eval_examples": 4,
            "eval_metrics": {"eval_loss": 0.5, "eval_pair_acc": 0.75}}


def front_matter(card: str) -> dict:
    match = re.match(r"---\n(.*?)\n---\n", card, re.S)
    assert match, card[:200]
    return yaml.safe_load(match.group(1))


def python_block(card: str) -> str:
    return re.search(r"```python\n(.*?)```", card, re.S).group(1)


def score_function(card: str, step_values):
    """The snippet's score(prompt, steps), given scripted step values."""
    code = "def score" + python_block(card).split("def score")[1].split("\n\nprint(")[0]
    namespace = {}
    exec(code, {"step_values": step_values}, namespace)
    return namespace["score"]


def test_metadata_names_a_hub_base_model_and_what_the_scorer_was_trained_on():
    head = front_matter(model_card(PPM_META))
    assert head["library_name"] == "peft" and head["base_model"] == "Qwen/Qwen2.5-1.5B-Instruct"
    # No pipeline_tag: the hub widget would softmax the one output (1.0 everywhere); no widget at all.
    assert "pipeline_tag" not in head and head["inference"] is False
    assert head["datasets"] == ["gsm8k"]                          # the file name names the hub dataset
    assert (head["license"], head["license_name"]) == ("other", "same-as-base-model")   # none recorded
    assert front_matter(model_card({**PPM_META, "base_license": "apache-2.0"}))["license"] == "apache-2.0"
    assert {"masprm", "process-reward-model", "ppm", "lora"} <= set(head["tags"])
    assert head["objective"] == "ppm" and head["label_scheme"] == "pairs"   # no scheme recorded: ppm's default
    assert head["step_separator"] == "</step>" and head["text_style"] == "whole"
    assert head["training_data"] == {"file": "ppm_pairs_gsm8k_res_train.jsonl", "bytes": 12345,
                                     "train_examples": 96, "eval_examples": 4}
    (index,) = head["model-index"]
    (result,) = index["results"]
    assert result["task"]["type"] == "reward-modeling"
    assert result["dataset"] == {"name": "held-out records of ppm_pairs_gsm8k_res_train.jsonl",
                                 "type": "ppm_pairs_gsm8k_res_train.jsonl", "split": "eval"}
    assert result["metrics"] == [{"type": "loss", "value": 0.5, "name": "eval_loss"},
                                 {"type": "pair_acc", "value": 0.75, "name": "eval_pair_acc"}]
    assert "eval_metrics" not in head


def test_the_base_license_is_read_from_the_base_card(tmp_path):
    from masprm.train.card import base_license

    (tmp_path / "README.md").write_text("---\nlicense: apache-2.0\n---\n# a base\n")
    assert base_license(str(tmp_path)) == "apache-2.0"
    (tmp_path / "README.md").write_text("# no front matter\n")
    assert base_license(str(tmp_path)) is None and base_license(None) is None


@pytest.mark.parametrize("base", ["/home/me/models/qwen", "./qwen", "~/qwen", "a/b/c"])
def test_a_local_base_model_is_never_written_as_base_model(tmp_path, monkeypatch, base):
    card = model_card({**PPM_META, "base_model_id": base})
    assert "base_model" not in front_matter(card)
    assert "/home/me" not in card   # only the folder's last component is named
    # a hub-style id that is a folder here is local too
    (tmp_path / "org" / "model").mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    assert "base_model" not in front_matter(model_card({**PPM_META, "base_model_id": "org/model"}))


def test_only_a_local_base_is_looked_up_from_the_folders_above_the_scorer():
    # a base given as a checkout's relative path (the demo's): the snippet searches the scorer folder and the
    # folders above it (run in test_scorer_sharing.py); a hub base is the hub's id, left to transformers
    local = card_snippet({**PPM_META, "base_model_id": "artifacts/toy/policy"})
    assert "os.path.join(above, BASE)" in local and "os.path.join(above, BASE)" not in card_snippet(PPM_META)
    assert "runs as written from inside this folder" in model_card({**PPM_META, "base_model_id": "artifacts/toy/policy"})


def test_recorded_objective_label_scheme_and_aggregation_are_stated():
    meta = {**PPM_META, "mode": "traj", "objective": "traj", "label_scheme": "first_error", "step_agg": "min",
            "text_style": "steps"}
    card = model_card(meta)
    head = front_matter(card)
    assert (head["objective"], head["label_scheme"], head["step_agg"]) == ("traj", "first_error", "min")
    assert "**min over the step values**" in card
    assert score_function(card, lambda p, s: [0.5, -0.25, 0.75])("q", ["a", "b", "c"]) == -0.25   # min by hand
    mean = model_card({**meta, "step_agg": "mean"})
    assert score_function(mean, lambda p, s: [0.5, -0.25, 0.75])("q", ["a", "b", "c"]) == pytest.approx(1 / 3)
    # an aggregation the snippet does not compute is said in words, and the step values are returned
    card = model_card({**meta, "step_agg": "softmin"})
    assert "**softmin over the step values**" in card and "return step_values(prompt, steps)" in card


def test_the_value_is_the_last_separator_for_other_objectives():
    assert score_function(model_card(PPM_META), lambda p, s: [0.5, -0.25, 0.75])("q", ["a", "b", "c"]) == 0.75


def test_the_card_is_a_function_of_the_metadata(tmp_path):
    first = write_model_card(tmp_path, PPM_META).read_text()
    assert write_model_card(tmp_path, dict(reversed(list(PPM_META.items())))).read_text() == first
    assert "SCORER = \".\"" in first
    hub = model_card(PPM_META, hub_model_id="someone/masprm-gsm8k")
    assert "SCORER = \"someone/masprm-gsm8k\"" in hub and "snapshot_download(\"someone/masprm-gsm8k\")" in hub
    merged = model_card(PPM_META, merged=True)
    assert front_matter(merged)["library_name"] == "transformers" and "lora" not in front_matter(merged)["tags"]
    assert "AutoModelForTokenClassification.from_pretrained(SCORER" in merged and "peft" not in python_block(merged)


@pytest.mark.parametrize("style, max_length, prompt_cut", [("whole", 2048, 0), ("whole", 12, 0),
                                                           ("steps", 2048, 768), ("steps", 30, 6)])
def test_the_snippet_tokenises_as_the_scorer_loader(tiny_model_dir, style, max_length, prompt_cut):
    """The snippet's token_ids() against masprm's TextEncoder, with and without cuts (tiny tokenizer)."""
    from masprm.models.loading import load_tokenizer

    tokenizer = load_tokenizer(str(tiny_model_dir), padding_side="right")
    sep_id = separator_token_id(tokenizer, "</step>")
    meta = {**PPM_META, "text_style": style, "max_length": max_length, "max_prompt_length": prompt_cut,
            "separator_id": sep_id}
    code = python_block(model_card(meta))
    defs = code[code.index("def token_ids"):code.index("@torch.no_grad()")]
    namespace = {"tokenizer": tokenizer, "SEP_ID": sep_id}
    exec(defs, namespace)
    encoder = TextEncoder(tokenizer, sep_id, max_length, prompt_cut if style == "steps" else 0, style=style)
    prompt, steps = "Tom has 3 apples and buys 4 more. How many?", ["Add them: 3 + 4 = 7.", "The answer is 7."]
    if style == "whole":
        from masprm.state_text import join_steps
        expected = encoder.encode([str(join_steps(prompt, steps))])[0]
    else:
        expected = encoder.encode_steps(prompt, steps)[0]
    assert namespace["token_ids"](prompt, steps) == expected
    assert expected[-1] == sep_id and len(expected) <= max_length


def test_the_separator_id_comes_from_the_record_or_the_tokenizer():
    assert "SEP_ID = 151665  # the token of \"</step>\"" in card_snippet(PPM_META)
    no_id = {k: v for k, v in PPM_META.items() if k != "separator_id"}
    assert "SEP_ID = tokenizer.convert_tokens_to_ids(\"</step>\")" in card_snippet(no_id)
