"""A model folder checked before it loads: its generation files, and questions, system prompts and training
records that would not fit its context."""

from __future__ import annotations

import json

import pytest


def _policy_copy(tiny_model_dir, tmp_path, edit_generation=None, edit_config=None) -> str:
    import shutil

    folder = tmp_path / "policy"
    shutil.copytree(tiny_model_dir, folder)
    for name, edit in (("generation_config.json", edit_generation), ("config.json", edit_config)):
        if edit is not None:
            path = folder / name
            data = json.loads(path.read_text()) if path.is_file() else {}
            text = edit(data)
            path.write_text(text if isinstance(text, str) else json.dumps(data))
    return str(folder)


@pytest.mark.parametrize("edit, problem", [
    (lambda d: '{"eos_token_id": 1,', "generation_config.json cannot be read ("),
    (lambda d: "[1, 2]", "generation_config.json must hold a JSON object"),
    (lambda d: d.update(repetition_penalty=-1.2), "generation_config.json: repetition_penalty must be a number > 0, "
                                                  "got -1.2"),
    (lambda d: d.update(top_p=1.5), "generation_config.json: top_p must be a number in (0, 1], got 1.5"),
    (lambda d: d.update(top_k="many"), "generation_config.json: top_k must be a number >= 0, got 'many'"),
    (lambda d: d.update(eos_token_id=[3, 70000]), "the EOS token id 70000 is outside the vocabulary (0..511), so "
                                                  "no message could end"),
])
def test_a_policy_s_generation_files_are_checked_before_it_loads(tiny_model_dir, tmp_path, edit, problem):
    from masprm.errors import ModelError
    from masprm.models.model_checks import check_model_serves

    folder = _policy_copy(tiny_model_dir, tmp_path, edit_generation=edit)
    with pytest.raises(ModelError) as caught:
        check_model_serves(folder, "model_id", chat=True)
    assert str(caught.value).startswith(f"model_id {folder}: {problem}"), str(caught.value)


def test_a_system_prompt_or_question_longer_than_the_context_is_refused_before_loading(tiny_model_dir, tmp_path):
    from transformers import AutoTokenizer

    from masprm.errors import ConfigError, DataError
    from masprm.models.model_checks import check_questions_fit

    folder = _policy_copy(tiny_model_dir, tmp_path, edit_config=lambda d: d.update(max_position_embeddings=64))
    tokenizer = AutoTokenizer.from_pretrained(folder)
    prompt, question = "Solve it step by step. " * 4, "How many apples are there? " * 4
    p, q = (len(tokenizer(t, add_special_tokens=False)["input_ids"]) for t in (prompt, question))
    assert p < 64 and q < 64 <= p + q   # each fits alone, not together
    check_questions_fit(folder, "model_id", [question], where="data.jsonl")   # alone it fits
    with pytest.raises(DataError) as caught:
        check_questions_fit(folder, "model_id", ["2 + 2?", question], where="data.jsonl", prompts=[prompt, "Hi."])
    assert str(caught.value) == (f"data.jsonl: example 1: the question is {q} tokens (with the longest system prompt, "
                                 f"{p + q}), more than the context of {folder} (64 tokens)")
    with pytest.raises(ConfigError, match=r"^mas_config: a system prompt is \d+ tokens, more than the context"):
        check_questions_fit(folder, "model_id", ["2 + 2?"], where="data.jsonl", prompts=[prompt * 3])


def test_stage3_refuses_a_max_length_beyond_the_base_model_s_context(tiny_model_dir, tmp_path):
    import types

    from masprm.errors import ConfigError
    from masprm.train.trainer import _check_fits_context

    folder = _policy_copy(tiny_model_dir, tmp_path, edit_config=lambda d: d.update(max_position_embeddings=64))
    _check_fits_context(types.SimpleNamespace(model_id=folder, trust_remote_code=False, max_length=64))   # = context
    with pytest.raises(ConfigError) as caught:
        _check_fits_context(types.SimpleNamespace(model_id=folder, trust_remote_code=False, max_length=65))
    assert str(caught.value) == (f"max_length 65: more than the context of {folder} (64 tokens); pass `max_length` "
                                 "64 or less")
    assert caught.value.setting == "max_length"
