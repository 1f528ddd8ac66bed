"""Scorer formats (masprm.scorer_formats): each public layout built here as a tiny random model, detected from its
folder or named with --scorer_format, served with the values its own logits give by hand, and kept apart in the
fingerprint. Nothing is downloaded: every model is the session's tiny Qwen2 with another head."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest
import torch
from transformers import (AutoModelForCausalLM, AutoModelForSequenceClassification, AutoModelForTokenClassification,
                          AutoTokenizer)

from helpers_cli import FAST, run_module, write_gsm8k
from helpers_eval_world import chain_graph, example, settings
from masprm.data import LoadedData
from masprm.errors import ConfigError, ModelError
from masprm.models.scorer import load_scorer
from masprm.roles import ROLES
from masprm.scorer_folder import read_scorer_folder
from masprm.scorer_formats import SCORER_FORMATS, ScorerFormatFlags, choose_format, detected_format, scorer_identity
from masprm.state_text import StepText

TEXTS = [StepText("What is 2 + 2?", ["2 + 2 = 4", "So the answer is 4"]), StepText("Tom has 3 apples.", ["3"])]
EVAL = "masprm.stages.evaluate"


def save(model, tokenizer, folder: Path) -> Path:
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def with_token(tiny: Path, token: str):
    tokenizer = AutoTokenizer.from_pretrained(tiny)
    tokenizer.add_special_tokens({"extra_special_tokens": [token]})
    return tokenizer


@pytest.fixture(scope="module")
def folders(tmp_path_factory, tiny_model_dir) -> dict[str, Path]:
    """One folder per public layout, each the tiny model with the head its format reads (random weights)."""
    from peft import LoraConfig, get_peft_model

    root, tiny = tmp_path_factory.mktemp("formats"), Path(tiny_model_dir)
    torch.manual_seed(0)
    plain = AutoTokenizer.from_pretrained(tiny)
    reward = AutoModelForSequenceClassification.from_pretrained(tiny, num_labels=1)
    reward.config.pad_token_id = plain.pad_token_id          # as RewardTrainer saves it
    adapter = get_peft_model(AutoModelForSequenceClassification.from_pretrained(tiny, num_labels=1),
                             LoraConfig(task_type="SEQ_CLS", r=2, init_lora_weights=False))   # B != 0: it counts
    tagged = with_token(tiny, "<extra_0>")
    classifier = AutoModelForTokenClassification.from_pretrained(tiny, num_labels=2)
    classifier.resize_token_embeddings(len(tagged))
    shepherd = with_token(tiny, "ки")
    lm = AutoModelForCausalLM.from_pretrained(tiny)
    lm.resize_token_embeddings(len(shepherd))
    own = root / "own"
    own.mkdir()
    (own / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": str(tiny), "task_type": "TOKEN_CLS"}))
    (own / "masprm_scorer.json").write_text(json.dumps({"objective": "ppm", "status": "completed"}))
    return {"reward": save(reward, plain, root / "reward"), "reward_adapter": save(adapter, plain, root / "adapter"),
            "tag": save(classifier, tagged, root / "tag"), "lm": save(lm, shepherd, root / "lm"), "own": own}


def by_hand(model, tokenizer, text: str):
    """The model's own output for one text, unbatched: the reference the served values are computed from."""
    with torch.no_grad():
        return model(torch.tensor([tokenizer(text)["input_ids"]])).logits[0].double()


def two_way(first: float, second: float) -> float:
    """2p - 1, p = e^first / (e^first + e^second)."""
    return 2 / (1 + math.exp(second - first)) - 1


def tagged(text: StepText, tag: str) -> str:
    return text.prompt + "".join(step + tag for step in text.steps)


def test_each_format_is_detected_from_what_its_folder_shows(folders, tiny_model_dir):
    found = {name: detected_format(read_scorer_folder(path)) for name, path in folders.items()}
    assert {name: f and f[0].name for name, f in found.items()} == {
        "reward": "trl_reward", "reward_adapter": "trl_reward", "tag": "step_tag_classifier", "lm": None,
        "own": "masprm"}
    assert found["reward"][1] == "config.json: Qwen2ForSequenceClassification with 1 label"
    assert found["reward_adapter"][1] == "adapter_config.json: task_type SEQ_CLS"
    # a causal LM is a policy as much as a PRM: read as the project's own (and refused as a plain model) unless named
    assert choose_format(read_scorer_folder(folders["lm"])).scorer_format == "masprm"
    named = choose_format(read_scorer_folder(folders["lm"]), ScorerFormatFlags(scorer_format=["prm=causal_lm_good_bad"]),
                          ROLES["masprm"])
    assert (named.scorer_format, named.format_options) == \
        ("causal_lm_good_bad", {"step_tag": "ки", "good_token": "+", "bad_token": "-"})
    assert SCORER_FORMATS.names() == ["causal_lm_good_bad", "masprm", "step_tag_classifier", "trl_reward"]


def test_a_trl_reward_model_serves_tanh_half_of_its_reward_of_the_text_and_eos(folders):
    tokenizer = AutoTokenizer.from_pretrained(folders["reward"])
    model = AutoModelForSequenceClassification.from_pretrained(folders["reward"]).eval()
    expected = [math.tanh(by_hand(model, tokenizer, str(t) + tokenizer.eos_token)[0].item() / 2) for t in TEXTS]
    # batched with padding: the model pools at each row's last token that is not padding, as in training
    served = load_scorer(folders["reward"], setting="orm_dir").score_batch(TEXTS)
    assert served == pytest.approx(expected, abs=1e-6)
    assert str(TEXTS[0]).endswith("</step>")   # the text RewardTrainer saw: the exported pairs' </step> kept


def test_a_trl_reward_adapter_loads_on_the_base_it_names(folders, tiny_model_dir):
    from peft import PeftModel

    tokenizer = AutoTokenizer.from_pretrained(folders["reward_adapter"])
    base = AutoModelForSequenceClassification.from_pretrained(tiny_model_dir, num_labels=1)
    base.config.pad_token_id = tokenizer.pad_token_id
    model = PeftModel.from_pretrained(base, str(folders["reward_adapter"])).eval()
    expected = [math.tanh(by_hand(model, tokenizer, str(t) + tokenizer.eos_token)[0].item() / 2) for t in TEXTS]
    served = load_scorer(folders["reward_adapter"], setting="orm_dir").score_batch(TEXTS)
    assert served == pytest.approx(expected, abs=1e-6)
    assert abs(served[0] - served[1]) > 1e-4   # the texts are told apart


def test_a_step_tag_classifier_serves_2p_minus_1_of_p_good_at_the_last_tag(folders):
    tokenizer = AutoTokenizer.from_pretrained(folders["tag"])
    model = AutoModelForTokenClassification.from_pretrained(folders["tag"]).eval()
    tag_id = tokenizer.convert_tokens_to_ids("<extra_0>")
    expected = []
    for text in TEXTS:
        ids = tokenizer(tagged(text, "<extra_0>"))["input_ids"]
        last = max(i for i, t in enumerate(ids) if t == tag_id)
        bad, good = by_hand(model, tokenizer, tagged(text, "<extra_0>"))[last].tolist()
        expected.append(two_way(good, bad))
    scorer = load_scorer(folders["tag"])
    assert scorer.separator == "<extra_0>"   # the searches build their texts with the tag
    assert scorer.score_batch(TEXTS) == pytest.approx(expected, abs=1e-6)
    # the good label from the flag (or from config.json's id2label): label 0 reverses every value
    record = choose_format(read_scorer_folder(folders["tag"]), ScorerFormatFlags(good_label=0), ROLES["masprm"])
    assert load_scorer(folders["tag"], record=record).score_batch(TEXTS) == pytest.approx([-v for v in expected], abs=1e-6)


def test_a_good_bad_causal_lm_serves_2p_minus_1_of_the_good_tokens_share(folders):
    tokenizer = AutoTokenizer.from_pretrained(folders["lm"])
    model = AutoModelForCausalLM.from_pretrained(folders["lm"]).eval()
    tag_id = tokenizer.convert_tokens_to_ids("ки")
    good, bad = tokenizer.convert_tokens_to_ids(["+", "-"])
    expected = []
    for text in TEXTS:
        ids = tokenizer(tagged(text, "ки"))["input_ids"]
        last = max(i for i, t in enumerate(ids) if t == tag_id)
        logits = by_hand(model, tokenizer, tagged(text, "ки"))[last]   # the next token's after the tag
        expected.append(two_way(logits[good].item(), logits[bad].item()))
    record = choose_format(read_scorer_folder(folders["lm"]), ScorerFormatFlags(scorer_format=["causal_lm_good_bad"]),
                           ROLES["masprm"])
    assert load_scorer(folders["lm"], record=record).score_batch(TEXTS) == pytest.approx(expected, abs=1e-6)


def test_a_token_the_tokenizer_lacks_is_one_line(folders, tiny_model_dir):
    record = choose_format(read_scorer_folder(tiny_model_dir), ScorerFormatFlags(scorer_format=["causal_lm_good_bad"]),
                           ROLES["masprm"])
    with pytest.raises(ModelError, match=r"^prm_dir .*: step_tag 'ки' is not a token of this scorer's tokenizer "
                                         r"\(it is \d+ tokens\); pass `step_tag`"):
        load_scorer(tiny_model_dir, record=record)
    record = choose_format(read_scorer_folder(folders["lm"]),
                           ScorerFormatFlags(scorer_format=["causal_lm_good_bad"], good_token="<good>"), ROLES["masprm"])
    with pytest.raises(ModelError, match="good_token '<good>' is not a token"):
        load_scorer(folders["lm"], record=record)
    # "s" is a token of its own, but "apple" + "s" is the one token "apples": the value would be read elsewhere
    record = choose_format(read_scorer_folder(folders["lm"]),
                           ScorerFormatFlags(scorer_format=["causal_lm_good_bad"], step_tag="s"), ROLES["masprm"])
    scorer = load_scorer(folders["lm"], record=record)
    tokenizer = AutoTokenizer.from_pretrained(folders["lm"])
    good, bad = tokenizer.convert_tokens_to_ids(["+", "-"])
    last = by_hand(AutoModelForCausalLM.from_pretrained(folders["lm"]).eval(), tokenizer, "Tom has 3 apples")[-1]
    # a plain string is no transcript: it is read at its last token, whatever the tag
    assert scorer.score_batch(["Tom has 3 apples"]) == pytest.approx([two_way(last[good].item(), last[bad].item())],
                                                                     abs=1e-6)
    with pytest.raises(ModelError, match=r"the step tag 's' does not survive tokenisation .* pass `step_tag`"):
        scorer.score_batch([StepText("Tom has 3", [" apple"])])


def test_unknown_or_contradicted_formats_are_refused_before_anything_loads(folders):
    with pytest.raises(ConfigError, match=r"^scorer_format trl_rm: unknown scorer format 'trl_rm' \(valid: "
                                          r"causal_lm_good_bad, masprm, step_tag_classifier, trl_reward; did you mean "
                                          r"'trl_reward'\?\)$"):
        ScorerFormatFlags(scorer_format=["trl_rm"])
    with pytest.raises(ConfigError, match="no scorer role 'critic'"):
        ScorerFormatFlags(scorer_format=["critic=masprm"])
    flags = ScorerFormatFlags(scorer_format=["orm=step_tag_classifier"])
    with pytest.raises(ModelError, match=r"^scorer_format orm=step_tag_classifier: `orm_dir` .*reward holds a "
                                         r"trl_reward scorer \(config.json: Qwen2ForSequenceClassification"):
        choose_format(read_scorer_folder(folders["reward"]), flags, ROLES["orm"], "orm_dir")


def test_each_role_takes_the_formats_that_serve_it(folders):
    from masprm.checks import check_scorer_role

    tag, reward = read_scorer_folder(folders["tag"]), read_scorer_folder(folders["reward"])
    check_scorer_role(tag, "masprm", "prm_dir")            # a PRM values partial transcripts
    check_scorer_role(tag, "handoff_masprm", "handoff_prm_dir")
    check_scorer_role(reward, "orm", "orm_dir")            # a reward model values finished ones
    with pytest.raises(ModelError, match=r"^orm_dir .*: holds a step-tag classifier PRM \(scorer format "
                                         r"step_tag_classifier\), a process scorer, read at every step, but the orm "
                                         r"role needs a --mode orm or gorm scorer; pass `allow_scorer_kind_mismatch`"):
        check_scorer_role(tag, "orm", "orm_dir")
    check_scorer_role(tag, "orm", "orm_dir", allow_any=True)
    check_scorer_role(reward, "masprm", "prm_dir", allow_any=True)


@pytest.mark.parametrize("argv, line", [
    (["--methods", "bon_orm", "--scorer_format", "trl"], "--scorer_format trl: unknown scorer format 'trl'"),
    (["--methods", "bon_orm", "--orm_dir", "{reward}", "--scorer_format", "masprm"],
     "--scorer_format masprm: --orm_dir {reward} holds a trl_reward scorer"),
    (["--methods", "sbs_prm", "--prm_dir", "{reward}"],
     "--prm_dir {reward}: holds a TRL reward model (scorer format trl_reward), an outcome scorer"),
])
def test_stage_4_says_a_bad_format_in_one_line_with_exit_2(folders, tmp_path, monkeypatch, capsys, argv, line):
    argv = [a.format(reward=folders["reward"]) for a in argv]
    code, err, _ = run_module(monkeypatch, capsys, EVAL, argv + ["--logs_dir", str(tmp_path / "logs")])
    assert code == 2 and len(err) == 1 and line.format(reward=folders["reward"]) in err[0]
    assert not (tmp_path / "logs").exists()


def test_stage_4_checks_a_step_tag_against_the_tokenizer_before_the_run(tiny_model_dir, tmp_path, monkeypatch,
                                                                        capsys):
    argv = ["--methods", "sbs_prm", "--prm_dir", str(tiny_model_dir), "--scorer_format", "causal_lm_good_bad",
            "--gen_model_id", str(tiny_model_dir), "--dataset", "gsm8k", "--data_file",
            str(write_gsm8k(tmp_path / "d.jsonl")), "--mas_config", "configs/gsm8k.yaml",
            "--logs_dir", str(tmp_path / "logs"), *FAST]
    code, err, _ = run_module(monkeypatch, capsys, EVAL, argv)
    assert code == 2 and len(err) == 1
    assert "step_tag 'ки' is not a token of this scorer's tokenizer" in err[0] and "--step_tag" in err[0]


def test_the_fingerprint_keeps_formats_apart_and_the_own_format_as_it_was(folders, tmp_path):
    from masprm.eval.runner import ModelSpec, condition_manifest

    own = read_scorer_folder(folders["own"])
    assert scorer_identity(own) == {"training": {"objective": "ppm", "label_scheme": "masprm"}}   # as before formats
    lm = read_scorer_folder(folders["lm"])
    s = settings(dataset="chain", split="test", gen_model_id="fake-policy", seed=14)

    def fingerprint(**flags) -> str:
        record = choose_format(lm, ScorerFormatFlags(**flags), ROLES["masprm"])
        specs = {"policy": ModelSpec("policy", "fake-policy"),
                 "masprm": ModelSpec("scorer", str(folders["lm"]), scorer=record)}
        return condition_manifest("sbs_prm", s, chain_graph(), LoadedData([example()], 0), specs)["fingerprint"]

    prints = {fingerprint(), fingerprint(scorer_format=["causal_lm_good_bad"]),
              fingerprint(scorer_format=["causal_lm_good_bad"], step_tag="<|im_end|>"),
              fingerprint(scorer_format=["causal_lm_good_bad"], good_token="=")}
    assert len(prints) == 4
    assert fingerprint(scorer_format=["masprm"]) == fingerprint()   # naming the detected format changes nothing
    copy = shutil.copytree(folders["own"], tmp_path / "own")
    assert scorer_identity(choose_format(read_scorer_folder(copy), ScorerFormatFlags(scorer_format=["masprm"]),
                                         ROLES["masprm"])) == scorer_identity(own)


def test_every_public_layout_passes_the_whole_folder_check(folders, tiny_model_dir):
    """The one checker (head present with its size, adapter against its base, finite weights) refuses none of
    the layouts the formats read, saved as transformers and peft save them."""
    from masprm.models.scorer_checks import check_scorer_fits

    for key, role, named in (("reward", "orm", None), ("reward_adapter", "orm", None), ("tag", "masprm", None),
                             ("lm", "masprm", "causal_lm_good_bad")):
        flags = ScorerFormatFlags(scorer_format=[named]) if named else ScorerFormatFlags()
        record = choose_format(read_scorer_folder(folders[key]), flags, ROLES[role], "prm_dir")
        check_scorer_fits(record, "prm_dir", record.base_model or str(tiny_model_dir))
