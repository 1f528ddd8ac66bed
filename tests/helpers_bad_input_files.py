"""The files every case of the bad-input table (tests/test_bad_inputs.py) reads, built once per module.

``build_workspace`` lays them out: configs (good, broken and off the schema), data, model folders that
cannot serve, stage-1 trees made by the real command, pairs, scorer folders (good, broken, of the wrong
kind), logs, links and loops; ``hostile_inputs``, ``round4_inputs`` and ``round5_inputs`` add the inputs of
the later rows.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest
import yaml

from helpers_bad_inputs import READONLY, REPO, STAGE1, main_of
from helpers_trees import GSM8K, gsm8k_tree


GSM8K_ROWS = [
    {"question": "Tom has 3 apples and buys 4 more. How many apples does he have?", "answer": "#### 7"},
    {"question": "A box holds 6 pens. How many pens are in 2 boxes?", "answer": "#### 12"},
]
LATIN1 = "caf\xe9 na\xefve".encode("latin-1")  # not UTF-8


def ppm_pair(i: int, same: bool = False) -> dict:
    chosen = [f"step {i}", f"good {i}"]
    return {"prompt": f"question {i}", "chosen_actions": chosen,
            "rejected_actions": list(chosen) if same else [f"step {i}", f"bad {i}"]}


def jsonl(records) -> str:
    return "".join(json.dumps(r) + "\n" for r in records)


def _truncate(path: Path, keep: float = 0.5) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])


def _adapter_folder(folder: Path, base: Path, mode: str = "ppm") -> Path:
    """An adapter folder as the trainer writes it (small real safetensors, a completed record)."""
    import torch
    from safetensors.torch import save_file

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "adapter_config.json").write_text(json.dumps(
        {"base_model_name_or_path": str(base), "peft_type": "LORA", "task_type": "TOKEN_CLS", "r": 2}))
    save_file({"w": torch.zeros(64, 8)}, str(folder / "adapter_model.safetensors"))
    (folder / "masprm_scorer.json").write_text(json.dumps({"mode": mode, "status": "completed"}))
    return folder


def _alias_bomb(levels: int) -> str:
    """A list of nine aliases of a list of nine aliases ... of nine 'A's: 9**(levels + 1) strings once expanded."""
    item = "&l0 [" + ", ".join(["A"] * 9) + "]"
    for k in range(1, levels + 1):
        item = f"&l{k} [{item}, {', '.join([f'*l{k - 1}'] * 8)}]"
    return f"agents:\n  - name: A\n    system_prompt: Solve.\nedges: [[-1, 0]]\nhandoff:\n  fixed_schedule: [{item}]\n"


ALIAS_BOMB = _alias_bomb(5)   # 531,441 strings: a 2.6 MB message once quoted whole


def _config_file(root: Path, name: str, text_or_data) -> None:
    text = text_or_data if isinstance(text_or_data, str) else yaml.safe_dump(text_or_data)
    (root / "configs" / name).write_text(text)


def _model_variant(models: Path, tiny: Path, name: str, config: dict | None = None) -> Path:
    """A copy of the tiny model, its config.json changed (a key set to None is removed)."""
    folder = models / name
    shutil.copytree(tiny, folder)
    if config is not None:
        data = json.loads((folder / "config.json").read_text())
        data.update(config)
        (folder / "config.json").write_text(json.dumps({k: v for k, v in data.items() if v is not None}))
    return folder


def _tree_text(depth: int) -> str:
    """A tree JSON nested `depth` levels deep (written as text: json.dumps itself stops at ~1000 levels)."""
    node = '{"visits": 1, "q_sum": 1.0, "q_mean": 1.0, "node_text": "x", "children": ['
    return node * depth + "]}" * depth


def hostile_inputs(root: Path, tiny_model_dir) -> None:
    """The inputs of the rows added for the third reliability round: links, traversal, model folders that
    cannot serve, scorers of the wrong kind, configs off the schema, bad questions, NaN and deep trees."""
    import datetime

    import torch
    from transformers import AutoTokenizer

    tiny = Path(tiny_model_dir)
    (root / "victim.txt").write_text("a file outside every output folder\n")
    [run] = (root / "results").glob("gsm8k_res_*")
    shutil.copytree(run, root / "planted" / run.name)
    (root / "planted" / run.name / ".lock").symlink_to("../../victim.txt")
    (root / "ckpt" / "linked").mkdir(parents=True)
    (root / "ckpt" / "linked" / "adapter_config.json").symlink_to("../../victim.txt")

    models = root / "models"
    _model_variant(models, tiny, "llama", {"model_type": "llama", "architectures": ["LlamaForCausalLM"]})
    _model_variant(models, tiny, "heads7", {"num_attention_heads": 7, "num_key_value_heads": 7})
    _model_variant(models, tiny, "gpt2cfg", {"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"],
                                              "n_embd": 64, "n_layer": 2, "n_head": 4})
    bigvocab = _model_variant(models, tiny, "bigvocab")
    tokenizer = AutoTokenizer.from_pretrained(tiny)
    tokenizer.add_tokens([f"extra_token_{i}" for i in range(600)])   # 1112 tokens over 512 embedding rows
    tokenizer.save_pretrained(bigvocab)
    badtemplate = _model_variant(models, tiny, "badtemplate")
    (badtemplate / "chat_template.jinja").write_text("{{ raise_exception('this template refuses every chat') }}")
    pickled = _model_variant(models, tiny, "pickled")
    (pickled / "model.safetensors").unlink()
    torch.save({"model.embed_tokens.weight": torch.zeros(512, 64), "saved": datetime.datetime(2024, 1, 1)},
               pickled / "pytorch_model.bin")

    base = models / "a" / "tiny"
    _adapter_folder(root / "scorers" / "orm", base, mode="orm")

    _config_file(root, "typo_prompt.yaml", {"agents": [{"name": "A", "system_promt": "Solve."}], "edges": [[-1, 0]]})
    _config_file(root, "typo_mnt.yaml", {"agents": [{"name": "A", "max_new_token": 8}], "edges": [[-1, 0]]})
    _config_file(root, "typo_top.yaml", {"agents": [{"name": "A"}], "edge": [[-1, 0]]})
    _config_file(root, "typo_edge.yaml", {"agents": [{"name": "A"}], "edges": [{"scr": -1, "dst": 0}]})
    _config_file(root, "orphan.yaml", {"agents": [{"name": "A"}, {"name": "B"}], "edges": [[-1, 0]]})
    _config_file(root, "huge_mnt.yaml", {"agents": [{"name": "A", "max_new_tokens": 10**12}], "edges": [[-1, 0]]})
    _config_file(root, "dup.yaml", "agents:\n  - name: A\nedges: [[-1, 0]]\nedges: []\n")
    _config_file(root, "bomb.yaml", ALIAS_BOMB)
    handoff = yaml.safe_load((REPO / "configs" / "math_handoff8.yaml").read_text())
    handoff["handoff"]["fixed_schedual"] = handoff["handoff"].pop("fixed_schedule")
    _config_file(root, "handoff_typo.yaml", handoff)

    (root / "qlist.jsonl").write_text(jsonl([{"question": ["How many?", "Two"], "answer": "#### 2"}]))
    (root / "qnum.jsonl").write_text(jsonl([{"question": 42, "answer": "#### 42"}]))
    (root / "blank.jsonl").write_text(jsonl([{"question": "  \n ", "answer": "#### 1"}]))
    (root / "long.jsonl").write_text(jsonl([GSM8K_ROWS[0], {"question": "apples and pens " * 1500,
                                                            "answer": "#### 3"}]))
    (root / "empty_text.jsonl").write_text(jsonl([{"prompt": "", "chosen_actions": ["", ""],
                                                   "rejected_actions": ["", " "]}] * 4))
    (root / "empty_steps.jsonl").write_text(jsonl([{"prompt": " ", "completions": ["", ""],
                                                    "labels": [1.0, -1.0]}] * 4))

    nan_tree = gsm8k_tree()
    nan_tree["q_mean"] = float("nan")
    (root / "trees" / "nan_res_x").mkdir()
    (root / "trees" / "nan_res_x" / "0.json").write_text(json.dumps(nan_tree))
    (root / "trees" / "deep300.json").write_text(_tree_text(300))
    (root / "trees" / "deep5000.json").write_text(_tree_text(5000))
    mapping = gsm8k_tree()
    mapping["children"][0]["children"] = {"first": mapping["children"][0]["children"]}
    (root / "trees" / "mapping.json").write_text(json.dumps(mapping))

    (root / "fake.csv").write_text("=== START single_pass | dataset=gsm8k ===\nCOMPLETED\n")
    (root / "manifest.json").write_text(json.dumps({"seed": 14}))


def round4_inputs(root: Path) -> None:
    """The inputs of the fourth reliability round (issue 44): links at and below an output, a loop of
    links, impossible logs."""
    [run] = (root / "results").glob("gsm8k_res_*")
    (root / "loop").symlink_to("loop")
    (root / "elsewhere").mkdir()
    (root / "linked_results").mkdir()
    (root / "linked_results" / run.name).symlink_to("../elsewhere")      # the run folder is a link
    (root / "ckpt" / "alias").symlink_to("../elsewhere")                # stage 3's output folder is a link
    base = root / "models" / "a" / "tiny"
    rank_text = _adapter_folder(root / "scorers" / "rank_text", base)
    (rank_text / "adapter_config.json").write_text(json.dumps(
        {"base_model_name_or_path": str(base), "peft_type": "LORA", "task_type": "TOKEN_CLS", "r": "8"}))
    short = _adapter_folder(root / "scorers" / "neg_length", base)
    (short / "masprm_scorer.json").write_text(json.dumps({"mode": "ppm", "status": "completed", "max_length": -5}))
    misfit = _adapter_folder(root / "scorers" / "misfit", base)
    import torch
    from safetensors.torch import save_file

    lora = "base_model.model.model.layers.0.self_attn.q_proj.lora_{}.weight"
    save_file({lora.format("A"): torch.zeros(2, 32), lora.format("B"): torch.zeros(64, 2)},   # the base's is 64 wide
              str(misfit / "adapter_model.safetensors"))
    (root / "plogs").mkdir()
    (root / "plogs" / "sampled_passes").symlink_to("../elsewhere")     # stage 4's store written through a link
    logs = root / "badlogs"
    logs.mkdir()
    (logs / "x_single_pass_ab_tiny_1.txt").write_text(
        "=== START single_pass | dataset=gsm8k ===\nAccuracy (pass@1): 3.75\nCOMPLETED\n")
    (logs / "x_single_pass_ab_tiny.txt").write_text(
        "=== START single_pass | dataset=gsm8k ===\nAccuracy (pass@1): 0.5\nCOMPLETED\n")
    (logs / "x_single_pass_ab_tiny_2.txt").write_text(
        "=== START single_pass | dataset=gsm8k ===\nAccuracy (pass@1): nan\nCOMPLETED\n")


def round5_inputs(root: Path) -> None:
    """The inputs of the fifth reliability round (issue 61): model folders whose weights, head or config
    cannot serve, and adapters (a scorer's, a warm start's) that do not fit their base."""
    import datetime

    import torch
    from safetensors.torch import load_file, save_file

    models, base = root / "models", root / "models" / "a" / "tiny"
    nan = _model_variant(models, base, "nan")
    weights = load_file(str(nan / "model.safetensors"))
    weights["model.norm.weight"] = torch.full_like(weights["model.norm.weight"], float("inf"))
    save_file(weights, str(nan / "model.safetensors"), metadata={"format": "pt"})
    noeos = _model_variant(models, base, "noeos", {"eos_token_id": None})
    for name, key in (("generation_config.json", "eos_token_id"), ("tokenizer_config.json", "eos_token")):
        data = json.loads((noeos / name).read_text())
        data.pop(key)
        (noeos / name).write_text(json.dumps(data))
    two = {"architectures": ["Qwen2ForTokenClassification"], "id2label": {"0": "bad", "1": "good"},
           "label2id": {"bad": 0, "good": 1}}
    _model_variant(models, base, "claims_prm", two)   # a policy's weights: no score head
    _model_variant(models, base, "labels_text", {**two, "num_labels": "two"})
    lora = "base_model.model.model.layers.0.self_attn.q_proj.lora_{}.weight"
    target = _adapter_folder(root / "scorers" / "target_missing", base)
    conf = json.loads((target / "adapter_config.json").read_text())
    (target / "adapter_config.json").write_text(json.dumps({**conf, "target_modules": ["q_proj", "c_attn"]}))
    nan_adapter = _adapter_folder(root / "scorers" / "nan_adapter", base)
    save_file({lora.format("A"): torch.full((2, 64), float("nan")), lora.format("B"): torch.zeros(64, 2)},
              str(nan_adapter / "adapter_model.safetensors"))
    pickled = _adapter_folder(root / "scorers" / "pickle_adapter", base)
    (pickled / "adapter_model.safetensors").unlink()
    torch.save({lora.format("A"): torch.zeros(2, 64), "saved": datetime.datetime(2024, 1, 1)},
               pickled / "adapter_model.bin")


def round5_side_files(root: Path) -> None:
    """The fifth round's side files and logs (issue 61): exclusion lists with an encoding or schema fault, and
    log folders whose only log has an impossible optional metric or is cut in the middle of its metric lines."""
    from helpers_stage4_logs import log_text
    from masprm.eval.pool_metrics import pool_report_lines

    lists = root / "lists"
    lists.mkdir()
    prompt = b'{"prompt": "A?"}\n'
    for name, data in (("latin1", prompt + '{"prompt": "caf\xe9?"}\n'.encode("latin-1")),
                       ("surrogate", prompt + b'{"prompt": "x\\ud800"}\n'), ("no_field", b'{"other": 1}\n'),
                       ("scalar", b'"A?"\n'), ("number_prompt", b'{"prompt": 7}\n')):
        (lists / f"{name}.jsonl").write_bytes(data)
    judged = pool_report_lines({"extra": {"judge_calls_mean": 1.5, "judge_parse_failure_rate": 0.0}})
    text = log_text().replace("COMPLETED", "\n".join([*judged, "COMPLETED"]))
    (root / "poollogs").mkdir()
    (root / "poollogs" / "gsm8k_voter_abc_tiny_14.txt").write_text(
        text.replace("Judge calls per example: 1.5000", "Judge calls per example: 1e999"))   # float(): inf
    (root / "cutlogs").mkdir()
    cut = text.split("Tokens:")[0] + "COMPLETED\n"   # the metric lines stop after Pass@10
    (root / "cutlogs" / "gsm8k_single_pass_abc_tiny_14.txt").write_text(cut)


def build_workspace(root: Path, tiny_model_dir) -> Path:
    """Everything the cases read, under `root`: configs, data, models, trees, pairs, scorers, logs."""
    from masprm.eval.logs import render_log

    (root / "configs").mkdir()
    team = dict(GSM8K)
    (root / "configs" / "gsm8k.yaml").write_text(yaml.safe_dump(team))
    (root / "configs" / "other.yaml").write_text(yaml.safe_dump(
        {"agents": [{"name": "Solo", "system_prompt": "Solve."}], "edges": [[-1, 0]]}))
    (root / "configs" / "noroot.yaml").write_text(yaml.safe_dump(
        {"agents": [{"name": "A", "system_prompt": "a"}, {"name": "B", "system_prompt": "b"}], "edges": [[0, 1]]}))
    (root / "configs" / "latin1.yaml").write_bytes(b"agents:\n  - name: A\n    system_prompt: " + LATIN1 + b"\n")
    (root / "configs" / "cycle.yaml").write_text(yaml.safe_dump(
        {"agents": [{"name": "A"}, {"name": "B"}], "edges": [[-1, 0], [0, 1], [1, 0]]}))
    shutil.copy(REPO / "configs" / "math_handoff8.yaml", root / "configs" / "math_handoff8.yaml")
    # run files (--config FILE) with a misspelt key, a list for a number, a list for the whole file
    (root / "configs" / "run_typo.yaml").write_text("n_rollout: 4\n")
    (root / "configs" / "run_badtype.yaml").write_text("epochs: [1, 2]\n")
    (root / "configs" / "run_list.yaml").write_text("- logs_dir\n- logs\n")

    (root / "gsm8k.jsonl").write_text(jsonl(GSM8K_ROWS))
    (root / "gsm8k_b.jsonl").write_text(jsonl(GSM8K_ROWS[::-1]))
    (root / "empty.jsonl").write_text("")
    (root / "latin1.jsonl").write_bytes(b'{"question": "' + LATIN1 + b'", "answer": "#### 1"}\n')
    (root / "broken.jsonl").write_text('{"question": "unterminated\n')
    (root / "afile").write_text("a file, not a folder\n")
    (root / READONLY).mkdir()
    (root / "empty_dir").mkdir()
    (root / "pic.png").mkdir()   # a folder where a picture goes

    models = root / "models"
    shutil.copytree(tiny_model_dir, models / "a" / "tiny")
    shutil.copytree(tiny_model_dir, models / "b" / "tiny")   # same base name, other weights
    weights = models / "b" / "tiny" / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-64:] = bytes(64)
    weights.write_bytes(bytes(data))
    notok = models / "notok"
    notok.mkdir()
    for name in ("config.json", "model.safetensors"):
        shutil.copy(Path(tiny_model_dir) / name, notok / name)
    shutil.copytree(tiny_model_dir, models / "trunc")
    _truncate(models / "trunc" / "model.safetensors")

    # Stage-1 trees, made by the real command (tiny model, short outputs).
    for agent in team["agents"]:
        agent["max_new_tokens"] = 4
    (root / "configs" / "gsm8k.yaml").write_text(yaml.safe_dump(team))
    cwd = os.getcwd()
    os.chdir(root)
    try:
        mp = pytest.MonkeyPatch()
        mp.setattr(sys, "argv", ["run_mcts.py", *STAGE1])
        from masprm.cli import run_cli
        with pytest.raises(SystemExit) as done:
            run_cli(main_of("run_mcts"))
        mp.undo()
        assert done.value.code == 0
    finally:
        os.chdir(cwd)
    [run] = (root / "results").glob("gsm8k_res_*")
    (root / "rf").mkdir()
    shutil.copytree(run, root / "legacy" / run.name)   # trees without the record of their settings
    (root / "legacy" / run.name / ".run_settings").unlink(missing_ok=True)
    (root / "rf" / run.name).write_text("a file where the run folder goes\n")
    trees = root / "trees"
    (trees / "gsm8k_res_plain").mkdir(parents=True)
    (trees / "gsm8k_res_plain" / "0.json").write_text(json.dumps(gsm8k_tree()))
    (trees / "latin1_res_x").mkdir()
    (trees / "latin1_res_x" / "0.json").write_bytes(b'{"node_text": "' + LATIN1 + b'"}')
    (trees / "noname").mkdir()
    (trees / "noname" / "0.json").write_text(json.dumps(gsm8k_tree()))
    (trees / "notatree.json").write_text(json.dumps({"hello": 1}))
    (trees / "blocked_res_x").mkdir()
    (trees / "blocked_res_x" / "0.json").write_text(json.dumps(gsm8k_tree()))
    (trees / "ppm_pairs_blocked_res_x.jsonl").mkdir()   # a folder where stage 2 writes a file

    pairs = [ppm_pair(i) for i in range(6)]
    (root / "pairs.jsonl").write_text(jsonl(pairs))
    (root / "pairs2.jsonl").write_text(jsonl(pairs[:4]))
    (root / "same.jsonl").write_text(jsonl([ppm_pair(i, same=True) for i in range(4)]))
    (root / "one.jsonl").write_text(jsonl(pairs[:1]))
    (root / "latin1_pairs.jsonl").write_bytes(b'{"prompt": "' + LATIN1 + b'", "chosen_actions": ["a"], '
                                              b'"rejected_actions": ["b"]}\n')
    finished = root / "ckpt" / "finished"
    finished.mkdir(parents=True)
    from masprm.checks import file_identity
    (finished / "masprm_scorer.json").write_text(json.dumps(
        {"mode": "ppm", "status": "completed", "settings": {"data_file": "pairs.jsonl"},
         "data": {"path": "pairs.jsonl", "identity": file_identity(root / "pairs.jsonl")}}))
    (finished / "adapter_config.json").write_text("{}")

    scorers = root / "scorers"
    base = models / "a" / "tiny"
    _adapter_folder(scorers / "good", base)
    (scorers / "empty").mkdir(parents=True)
    _adapter_folder(scorers / "noweights", base).joinpath("adapter_model.safetensors").unlink()
    _adapter_folder(scorers / "corrupt", base).joinpath("adapter_config.json").write_text("{not json")
    _truncate(_adapter_folder(scorers / "truncated", base) / "adapter_model.safetensors")
    unfinished = scorers / "unfinished"
    _adapter_folder(unfinished / "checkpoint-2", base)
    (unfinished / "checkpoint-2" / "masprm_scorer.json").unlink()
    (unfinished / "masprm_scorer.json").write_text(json.dumps({"mode": "ppm", "status": "training"}))

    logs = root / "logs"
    logs.mkdir()
    summary = {f"pass@{k}": 0.5 for k in range(1, 11)}
    summary.update(n=2, errors=0, tokens_mean=10.0, tokens_std=1.0, tokens_n=2, scorer_calls_total=0,
                   agent_runs_total=4, prm_calls_mean=0.0, agent_runs_mean=2.0)
    (logs / "gsm8k_single_pass_abc_tiny_14.txt").write_text(
        render_log(["=== START single_pass | dataset=gsm8k | N=2 | manifest=abc ==="], [], summary))
    (root / "unfinished_logs").mkdir()
    (root / "unfinished_logs" / "gsm8k_single_pass_abc_tiny_14.txt").write_text("=== START single_pass ===\n")
    (root / "aggregated_results.csv").write_text("Experiment,Seeds\nold,3\n")
    (root / "aggregated_results.png").write_bytes(b"\x89PNG old")
    hostile_inputs(root, tiny_model_dir)
    round4_inputs(root)
    round5_inputs(root)
    round5_side_files(root)
    return root
