"""Every model folder a command reads goes through one checker before anything loads (issue 61): a public
scorer's config.json values, the head a full-model scorer's format reads present with its size, a LoRA
adapter (a scorer's or a warm start's) whose weight file is sane, a pickle of tensors only, finite and
shaped for its base, and a policy's weights finite. Each case asserts the exact one line; the command-line
cases also that exit is 2 and that nothing was written or lost (the folders hashed before and after)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from helpers import snapshot
from helpers_cli import run_module

LORA_Q = "base_model.model.model.layers.0.self_attn.q_proj.lora_{}.weight"


# --------------------------------------------------------------------------- folders


def _copy(tiny: Path, folder: Path, config: dict | None = None) -> Path:
    """The tiny policy (hidden 64, vocabulary 512, tied embeddings) copied, with config.json values changed."""
    shutil.copytree(tiny, folder)
    if config is not None:
        path = folder / "config.json"
        path.write_text(json.dumps({**json.loads(path.read_text()), **config}))
    return folder


def _edit_weights(folder: Path, name: str = "model.safetensors", **tensors) -> None:
    """Add or replace tensors of the folder's safetensors file (None removes one)."""
    from safetensors.torch import load_file, save_file

    path = folder / name
    state = load_file(str(path))
    for key, value in tensors.items():
        key = key.replace("__", ".")
        state.pop(key, None) if value is None else state.__setitem__(key, value)
    save_file(state, str(path), metadata={"format": "pt"})


def _adapter(folder: Path, base: Path, tensors: dict | None = None, conf: dict | None = None) -> Path:
    """A LoRA adapter of rank 2 on q_proj of the tiny base (q_proj is 64 x 64)."""
    import torch
    from safetensors.torch import save_file

    folder.mkdir(parents=True)
    (folder / "adapter_config.json").write_text(json.dumps(
        {"base_model_name_or_path": str(base), "peft_type": "LORA", "r": 2, "lora_alpha": 4, "lora_dropout": 0.0,
         "target_modules": ["q_proj"], **(conf or {})}))
    tensors = tensors if tensors is not None else {LORA_Q.format("A"): torch.zeros(2, 64),
                                                   LORA_Q.format("B"): torch.zeros(64, 2)}
    save_file(tensors, str(folder / "adapter_model.safetensors"))
    return folder


def _label_config(n: int, arch: str) -> dict:
    return {"architectures": [arch], "id2label": {str(i): f"LABEL_{i}" for i in range(n)},
            "label2id": {f"LABEL_{i}": i for i in range(n)}}


def _fits(folder: Path, setting: str = "prm_dir", base: str | None = None, named: str | None = None) -> None:
    """Stage 4's reading of a scorer folder: its format (named or detected), then the whole check."""
    from masprm.models.scorer_checks import check_scorer_fits
    from masprm.roles import ROLES
    from masprm.scorer_folder import read_scorer_folder
    from masprm.scorer_formats import ScorerFormatFlags, choose_format

    flags = ScorerFormatFlags(scorer_format=[named]) if named else ScorerFormatFlags()
    record = choose_format(read_scorer_folder(folder), flags, ROLES["masprm"], setting)
    check_scorer_fits(record, setting, base or record.base_model)


def _refused(call, *args, **kwargs) -> str:
    from masprm.errors import MasprmError

    with pytest.raises(MasprmError) as caught:
        call(*args, **kwargs)
    return str(caught.value)


# --------------------------------------------------------------------------- class 1: config.json trusted


@pytest.mark.parametrize("config, problem", [
    ({"architectures": ["Qwen2ForTokenClassification"], "num_labels": "two"},
     "config.json: num_labels must be a whole number >= 1, got \"two\""),
    ({"architectures": ["Qwen2ForTokenClassification"], "id2label": {"good": "GOOD", "bad": "BAD"}},
     "config.json: id2label's keys must be the label numbers 0..1, got \"bad\", \"good\""),
    ({"architectures": ["Qwen2ForTokenClassification"], "id2label": {"0": "A", "1": "B"}, "num_labels": 3},
     "config.json: id2label names 2 labels, num_labels says 3"),
    ({"architectures": "Qwen2ForTokenClassification"},
     "config.json: architectures must be a list of class names, got \"Qwen2ForTokenClassification\""),
])
def test_a_public_scorer_s_config_values_are_checked_before_its_format_is_read(tiny_model_dir, tmp_path, config,
                                                                                problem):
    folder = _copy(Path(tiny_model_dir), tmp_path / "prm", config)
    assert _refused(_fits, folder) == f"`prm_dir` {folder}: {problem}"


# --------------------------------------------------------------------------- class 2: the head a format reads


def test_a_full_model_scorer_without_its_trained_head_is_refused_not_scored_at_random(tiny_model_dir, tmp_path):
    import torch

    tiny = Path(tiny_model_dir)
    # a policy's weights under a config that claims a 2-label token classifier (detected: step_tag_classifier)
    claims = _copy(tiny, tmp_path / "claims_prm", _label_config(2, "Qwen2ForTokenClassification"))
    assert _refused(_fits, claims) == (f"prm_dir {claims}: the weights hold no trained head (score.bias [2] is "
                                       "missing): loaded as a step-tag classifier PRM it would score with a random one")
    # ... and one that claims a 1-label reward model (detected: trl_reward; the orm role reads it)
    reward = _copy(tiny, tmp_path / "claims_rm", _label_config(1, "Qwen2ForSequenceClassification"))
    assert _refused(_fits, reward, "orm_dir") == (f"orm_dir {reward}: the weights hold no trained head (score.weight "
                                                  "[1, 64] is missing): loaded as a TRL reward model it would score "
                                                  "with a random one")
    # a head of the wrong size under a config that names that size is a mismatch of the weights
    wrong = _copy(tiny, tmp_path / "wrong_head", _label_config(2, "Qwen2ForTokenClassification"))
    _edit_weights(wrong, score__weight=torch.zeros(3, 64), score__bias=torch.zeros(3))
    assert _refused(_fits, wrong) == (f"prm_dir {wrong}: the head does not fit: score.bias is [3] in the weights, a "
                                      "step-tag classifier PRM of 2 output(s) reads [2]")
    # a 3-label classifier named as step_tag_classifier: never given a fresh 2-label head
    three = _copy(tiny, tmp_path / "three", _label_config(3, "Qwen2ForTokenClassification"))
    _edit_weights(three, score__weight=torch.zeros(3, 64), score__bias=torch.zeros(3))
    assert _refused(_fits, three, named="step_tag_classifier") == (
        f"prm_dir {three}: config.json names 3 labels, but a step-tag classifier PRM (scorer format "
        "step_tag_classifier) reads 2; a head of another size would be made up at random")
    # the project's own scorer saved as a full model (a merged export): its one-output head must be there
    own = _copy(tiny, tmp_path / "own", _label_config(1, "Qwen2ForTokenClassification"))
    (own / "masprm_scorer.json").write_text(json.dumps({"mode": "ppm", "status": "completed"}))
    assert _refused(_fits, own) == (f"prm_dir {own}: the weights hold no trained head (score.bias [1] is missing): "
                                    "loaded as a masprm scorer it would score with a random one")
    _edit_weights(own, score__weight=torch.zeros(1, 64), score__bias=torch.zeros(1))
    _fits(own)
    # the head present, of its size: it passes (then a NaN in it is refused)
    good = _copy(tiny, tmp_path / "good", _label_config(2, "Qwen2ForTokenClassification"))
    _edit_weights(good, score__weight=torch.zeros(2, 64), score__bias=torch.zeros(2))
    _fits(good)
    _edit_weights(good, score__weight=torch.full((2, 64), float("nan")))
    assert _refused(_fits, good) == (f"prm_dir {good}: model.safetensors: tensor score.weight holds NaN (the weights "
                                     "are broken; a model of them gives no usable value)")


# --------------------------------------------------------------------------- class 5: adapters, each role


def _bad_adapters(base: Path, root: Path) -> list[tuple[Path, str]]:
    """(an adapter folder, the problem its line names), one per fault of an adapter's files."""
    import torch

    cases = []
    shapes = _adapter(root / "shapes", base, {LORA_Q.format("A"): torch.zeros(2, 32),
                                              LORA_Q.format("B"): torch.zeros(64, 2)})
    cases.append((shapes, f"the adapter does not fit base model {base}: {LORA_Q.format('A')} is [2, 32], the base's "
                          "model.layers.0.self_attn.q_proj needs [2, 64]"))
    nan = _adapter(root / "nan", base, {LORA_Q.format("A"): torch.full((2, 64), float("nan")),
                                        LORA_Q.format("B"): torch.zeros(64, 2)})
    cases.append((nan, f"adapter_model.safetensors: tensor {LORA_Q.format('A')} holds NaN (the weights are broken; "
                       "a model of them gives no usable value)"))
    cut = _adapter(root / "cut", base)
    data = (cut / "adapter_model.safetensors").read_bytes()
    (cut / "adapter_model.safetensors").write_bytes(data[:-10])
    # the header describes all the bytes; 10 fewer are there
    cases.append((cut, f"adapter_model.safetensors is truncated or corrupt ({len(data) - 10} bytes, its header "
                       f"describes {len(data)})"))
    absurd = _adapter(root / "absurd", base)
    (absurd / "adapter_model.safetensors").write_bytes((2**62).to_bytes(8, "little") + data[8:])
    cases.append((absurd, f"adapter_model.safetensors is not a readable safetensors file (truncated or corrupt: its "
                          f"header length says {2**62} bytes, the file has {len(data)})"))
    pickled = _adapter(root / "pickled", base)
    (pickled / "adapter_model.safetensors").unlink()
    import datetime
    torch.save({LORA_Q.format("A"): torch.zeros(2, 64), "when": datetime.datetime(2024, 1, 1)},
               pickled / "adapter_model.bin")
    cases.append((pickled, "adapter_model.bin cannot be loaded safely (torch.load with weights_only refuses it: it "
                           "holds a datetime.datetime object, not only tensors); use a safetensors copy of the weights"))
    target = _adapter(root / "target", base, conf={"target_modules": ["q_proj", "c_attn"]})
    cases.append((target, f"adapter_config.json: target module 'c_attn' is not a module of base model {base} (an "
                          "adapter of another model?)"))
    return cases


def test_a_scorer_adapter_is_checked_whole_against_its_base(tiny_model_dir, tmp_path):
    base = Path(tiny_model_dir)
    for folder, problem in _bad_adapters(base, tmp_path):
        line = _refused(_fits, folder, base=str(base))
        # the safetensors reader names the file by its path; the others, the folder
        assert line in (f"prm_dir {folder}: {problem}", f"prm_dir {folder}: {folder / problem}"), line
    # a fitting adapter on a base of broken weights: the base is a model folder read too
    import torch

    broken = _copy(base, tmp_path / "broken_base")
    _edit_weights(broken, model__norm__weight=torch.full((64,), float("nan")))
    fits = _adapter(tmp_path / "fits", broken)
    assert _refused(_fits, fits, base=str(broken)) == (
        f"prm_dir {fits}: base model {broken}: model.safetensors: tensor model.norm.weight holds NaN (the weights "
        "are broken; a model of them gives no usable value)")


def test_a_scorer_adapter_without_its_head_is_refused(tiny_model_dir, tmp_path):
    import torch

    base = Path(tiny_model_dir)
    lora = {LORA_Q.format("A"): torch.zeros(2, 64), LORA_Q.format("B"): torch.zeros(64, 2)}
    for name, head, problem in (
            ("headless", {}, "the weights hold no trained head (score.bias [1] is missing): loaded as a masprm "
                             "scorer it would score with a random one"),
            ("two_heads", {"base_model.model.score.modules_to_save.default.weight": torch.zeros(2, 64),
                           "base_model.model.score.modules_to_save.default.bias": torch.zeros(2)},
             "the head does not fit: score.bias is [2] in the weights, a masprm scorer of 1 output(s) reads [1]")):
        folder = _adapter(tmp_path / name, base, {**lora, **head})
        (folder / "masprm_scorer.json").write_text(json.dumps({"mode": "ppm", "status": "completed"}))
        assert _refused(_fits, folder, base=str(base)) == f"prm_dir {folder}: {problem}"


def test_a_warm_start_adapter_is_checked_whole_before_training(tiny_model_dir, tmp_path):
    import types

    from masprm.train.warm_start import check_warm_start

    base = Path(tiny_model_dir)
    for folder, problem in _bad_adapters(base, tmp_path):
        cfg = types.SimpleNamespace(init_adapter_dir=str(folder), model_id=str(base), lora_r=2, lora_alpha=4,
                                    lora_dropout=0.0, separator="</step>", train_new_token_only=False)
        line = _refused(check_warm_start, cfg)
        assert line in (f"init_adapter_dir {folder}: {problem}", f"init_adapter_dir {folder}: {folder / problem}"), line


# --------------------------------------------------------------------------- the policy's weights


def test_a_policy_of_nan_weights_or_a_broken_header_is_refused_before_it_loads(tiny_model_dir, tmp_path):
    import torch

    from masprm.models.model_checks import check_model_serves

    nan = _copy(Path(tiny_model_dir), tmp_path / "nan")
    _edit_weights(nan, model__norm__weight=torch.full((64,), float("inf")))
    assert _refused(check_model_serves, str(nan), "model_id", chat=True) == (
        f"model_id {nan}: model.safetensors: tensor model.norm.weight holds inf (the weights are broken; a model of "
        "them gives no usable value)")
    header = _copy(Path(tiny_model_dir), tmp_path / "header")
    path = header / "model.safetensors"
    data = path.read_bytes()
    path.write_bytes((len(data)).to_bytes(8, "little") + data[8:])   # a header as long as the whole file
    assert _refused(check_model_serves, str(header), "model_id", chat=True) == (
        f"model_id {header}: {path} is not a readable safetensors file (truncated or corrupt: its header length "
        f"says {len(data)} bytes, the file has {len(data)})")


def test_the_finite_screen_names_nan_and_inf_in_every_dtype_and_passes_a_sum_that_merely_overflows():
    import torch

    from masprm.models.weight_files import _not_finite

    for dtype in (torch.float32, torch.float16, torch.bfloat16, torch.float8_e5m2):
        ok = torch.zeros(10, dtype=dtype)
        assert _not_finite(ok) is None
        nan, inf = ok.clone(), ok.clone()
        nan[3], inf[7] = float("nan"), float("-inf")
        assert (_not_finite(nan), _not_finite(inf)) == ("NaN", "inf"), dtype
    # 3e38 + 3e38 overflows float32 (its largest is about 3.4e38), yet every value is finite
    assert _not_finite(torch.tensor([3e38, 3e38])) is None


def test_a_policy_whose_files_name_no_eos_token_is_refused(tiny_model_dir, tmp_path):
    from masprm.models.model_checks import check_model_serves

    folder = _copy(Path(tiny_model_dir), tmp_path / "noeos")
    for name, key in (("config.json", "eos_token_id"), ("generation_config.json", "eos_token_id"),
                      ("tokenizer_config.json", "eos_token")):
        data = json.loads((folder / name).read_text())
        data.pop(key)
        (folder / name).write_text(json.dumps(data))
    # the tokenizer class still has a built-in EOS (<|endoftext|>), which no file of the folder chose
    assert _refused(check_model_serves, str(folder), "model_id", chat=True) == (
        f"model_id {folder}: no end-of-turn token: neither generation_config.json, config.json nor the tokenizer "
        "names an EOS token, so every message would run to max_new_tokens")


# --------------------------------------------------------------------------- the commands: one line, nothing left


def test_stage3_refuses_a_bad_warm_start_before_its_output_folder_exists(tiny_model_dir, tmp_path, monkeypatch,
                                                                          capsys):
    import torch

    monkeypatch.chdir(tmp_path)
    base = _copy(Path(tiny_model_dir), tmp_path / "base")
    _adapter(tmp_path / "nan", base, {LORA_Q.format("A"): torch.full((2, 64), float("nan")),
                                      LORA_Q.format("B"): torch.zeros(64, 2)})
    (tmp_path / "pairs.jsonl").write_text("".join(json.dumps(
        {"prompt": f"{i}?", "chosen_actions": [f"{i}"], "rejected_actions": [f"{i + 1}"]}) + "\n" for i in range(4)))
    train = ["--mode", "ppm", "--data_dir", "pairs.jsonl", "--model-id", "base", "--output-dir", "out",
             "--max-steps", "1", "--lora-r", "2", "--lora-alpha", "4", "--lora-dropout", "0", "--quiet"]
    before = snapshot(tmp_path)
    for extra, line in (
            (["--init-adapter-dir", "nan"], f"--init-adapter-dir nan: adapter_model.safetensors: tensor "
                                            f"{LORA_Q.format('A')} holds NaN (the weights are broken; a model of "
                                            "them gives no usable value)"),
            (["--init-adapter-dir="], "argument --init-adapter-dir/--init_adapter_dir: an empty path ('') names no "
                                      "file or folder (see --help)"),
            (["--max-length", "4096"], "--max-length 4096: more than the context of base (2048 tokens); pass "
                                       "--max-length 2048 or less")):
        code, lines, _ = run_module(monkeypatch, capsys, "masprm.stages.train", train + extra)
        assert code == 2 and lines == [f"train.py: error: {line}"], lines
        assert snapshot(tmp_path) == before   # no output folder, nothing written, nothing lost


def test_stage1_refused_late_leaves_no_record_and_keeps_what_was_there(tmp_path):
    from masprm.errors import ModelOutputError
    from masprm.run_folder import SETTINGS_FILE, check_or_record_settings, locked_folder

    # a new run folder in a new out_root: its record goes with them when the model's first output is refused
    with pytest.raises(ModelOutputError):
        with locked_folder(tmp_path / "results" / "run", "out_root") as folder:
            check_or_record_settings(folder, {"seed": 1})
            raise ModelOutputError("model_id m: the model gave nan as a log-prob", setting="model_id")
    assert list(tmp_path.iterdir()) == []
    # a resumed run: its earlier record and trees survive the same refusal
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "0.json").write_text("{}")
    (tmp_path / "old" / SETTINGS_FILE).write_text(json.dumps({"seed": 1}))
    before = snapshot(tmp_path)
    with pytest.raises(ModelOutputError):
        with locked_folder(tmp_path / "old", "out_root") as folder:
            check_or_record_settings(folder, {"seed": 1})
            raise ModelOutputError("model_id m: the model gave nan as a log-prob", setting="model_id")
    assert snapshot(tmp_path) == before


def test_stage1_refuses_a_ray_head_that_does_not_answer_before_its_run_folder_exists(tiny_model_dir, tmp_path,
                                                                                       monkeypatch, capsys):
    import socket

    from helpers_cli import stage1_args

    monkeypatch.chdir(tmp_path)
    with socket.socket() as probe:   # a port nothing listens on: bound, then closed
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    argv = stage1_args(tmp_path, Path(tiny_model_dir), n=1) + ["--out_root", "results", "--ray_address",
                                                              f"127.0.0.1:{port}", "--ray_connect_timeout", "2"]
    before = snapshot(tmp_path)
    code, lines, _ = run_module(monkeypatch, capsys, "masprm.stages.trees", argv)
    assert code == 2 and len(lines) == 1 and lines[0].startswith(
        f"trees.py: error: --ray_address 127.0.0.1:{port}: nothing answers there within 2 s ("), lines
    assert snapshot(tmp_path) == before   # no run folder, no .run_settings


def test_export_refuses_an_adapter_of_text_rank_in_one_line(tiny_model_dir, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    scorer = _adapter(tmp_path / "scorer", Path(tiny_model_dir), conf={"r": "2"})
    (scorer / "masprm_scorer.json").write_text(json.dumps({"mode": "ppm", "status": "completed", "text_style": "whole"}))
    before = snapshot(tmp_path)
    code, lines, _ = run_module(monkeypatch, capsys, "masprm.stages.export_scorer", ["scorer", "--merged", "merged"])
    assert code == 2 and lines == [f"export_scorer.py: error: scorer {scorer.name}: adapter_config.json: r must be a "
                                   "whole number >= 1, got '2'"], lines
    assert snapshot(tmp_path) == before


def test_a_run_refused_at_the_policy_s_first_output_leaves_nothing_and_keeps_what_was_there(tiny_model_dir, tmp_path,
                                                                                             monkeypatch, capsys):
    """Finite weights that overflow (a final norm of 3e38) pass every check before loading; the first token's
    logits are NaN. Stages 1 and 4 refuse in one line and leave no folder, record or log of their own."""
    import torch
    import yaml

    from helpers_cli import TWO_AGENTS, stage1_args, write_gsm8k

    policy = _copy(Path(tiny_model_dir), tmp_path / "policy")
    _edit_weights(policy, model__norm__weight=torch.full((64,), 3e38))
    monkeypatch.chdir(tmp_path)
    stage1 = stage1_args(tmp_path, policy, n=1) + ["--out_root", "results"]
    (tmp_path / "team.yaml").write_text(yaml.safe_dump(TWO_AGENTS))
    data = write_gsm8k(tmp_path / "gsm8k.jsonl")
    stage4 = ["--methods", "single_pass", "--dataset", "gsm8k", "--data_file", str(data), "--gen_model_id",
              str(policy), "--mas_config", "team.yaml", "--sample_n", "1", "--max_new_tokens", "4"]
    (tmp_path / "kept").mkdir()
    (tmp_path / "kept" / "earlier.txt").write_text("a log of an earlier run\n")
    before = snapshot(tmp_path)
    for module, argv in (("masprm.stages.trees", stage1), ("masprm.stages.evaluate", stage4 + ["--logs_dir", "elogs"]),
                         ("masprm.stages.evaluate", stage4 + ["--logs_dir", "kept"])):
        code, lines, _ = run_module(monkeypatch, capsys, module, argv)
        errors = [line for line in lines if ": error: " in line]
        assert code == 2 and len(errors) == 1 and errors[0].endswith(
            "the model gave nan as logits (new token 1) (not a finite number); its weights or its precision are "
            "broken"), lines
        assert snapshot(tmp_path) == before, module   # no run folder, out_root, log or logs_dir left; kept/ kept
