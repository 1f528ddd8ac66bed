"""Benchmark stage 4: examples per minute of the demo's six conditions, one example vs many in flight.

    python bench/bench_eval.py [--sample_n 20] [--batch_sizes 1 16] [--max_new_tokens N]
                               [--gen_model_id DIR --prm_dir DIR --orm_dir DIR]

Evaluates the demo's conditions (single_pass, sbs_logprob, sbs_prm,
mcts_logprob, mcts_prm, mcts_orm) with the demo's search settings on the toy
test split, once per ``--search_batch_size`` in ``--batch_sizes``, side by
side in this process. The models are the demo's (artifacts/toy/policy,
checkpoints/toy-ppm, checkpoints/toy-orm) when they exist, else the tiny
model with one-step scorers (then outputs run to --max_new_tokens, default
32 there). Reports examples per minute over all conditions, the speed-up
over the first batch size, mean rows per model call, the share of wall time
inside model calls, and whether the logs match the first run's: the text
logs byte for byte, the records up to the last digits of raw scorer values
(a scorer's forward rounds differently in another batch shape). Model
loading is not counted. Exits 1 when logs differ.
"""

import tempfile
import time
from pathlib import Path

from masprm.cli import ArgumentParser, check, run_cli

REPO = Path(__file__).resolve().parents[1]
DEMO = {"gen_model_id": "artifacts/toy/policy", "prm_dir": "checkpoints/toy-ppm", "orm_dir": "checkpoints/toy-orm"}
METHODS = ("single_pass", "sbs_logprob", "sbs_prm", "mcts_logprob", "mcts_prm", "mcts_orm")
DEMO_FLAGS = ["--b1", "3", "--b2", "5", "--n_simulations", "10", "--max_children", "3", "--c_uct", "2",
              "--sbs_temperature", "0.7", "--mcts_temperature", "0.7", "--top_p", "0.95"]


class Timed:
    """Wraps a policy or scorer: seconds inside its calls, calls and rows."""

    def __init__(self, model, clock):
        self.model, self.clock = model, clock

    def __getattr__(self, name):
        value = getattr(self.model, name)
        if name not in ("sample", "logprob", "score_batch"):
            return value

        def timed(first, *args, **kw):
            rows = len(first) * (args[0] if name == "sample" else 1)
            start = time.perf_counter()
            try:
                return value(first, *args, **kw)
            finally:
                self.clock["seconds"] += time.perf_counter() - start
                self.clock["calls"] += 1
                self.clock["rows"] += rows
        return timed


def one_step_scorer(folder: Path, base: str) -> str:
    """A ppm adapter trained for one step on the base model: the scoring cost of a real one."""
    import json

    from masprm.train import TrainConfig, train_scorer

    pairs = folder / "pairs.jsonl"
    folder.mkdir(parents=True, exist_ok=True)
    pairs.write_text("".join(json.dumps({"prompt": f"Q{i}? ", "chosen_actions": [f"{i} ok"],
                                         "rejected_actions": [f"{i} no"]}) + "\n" for i in range(8)))
    train_scorer(TrainConfig(mode="ppm", data_file=str(pairs), output_dir=str(folder / "scorer"), model_id=base,
                             max_steps=1, grad_accum=1, lora_r=8, progress=False))
    return str(folder / "scorer")


def main() -> int:
    ap = ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sample_n", type=int, default=20, help="toy test examples (default 20 of 60)")
    ap.add_argument("--batch_sizes", type=int, nargs="+", default=[1, 16])
    ap.add_argument("--max_new_tokens", type=int, default=None,
                    help="cap per agent output (default: the demo's 1024 with its policy, 32 with the tiny model)")
    for name, default in DEMO.items():
        ap.add_argument(f"--{name}", default=None, help=f"default {default} when it exists, else the tiny model")
    args = ap.parse_args()
    check(args.sample_n >= 1 and all(b >= 1 for b in args.batch_sizes), "counts must be >= 1")

    import torch

    from masprm.stages.evaluate import model_specs, parse_command
    from masprm.data import load_examples
    from masprm.eval.runner import load_model, run_conditions
    from masprm.graph import load_mas_config
    from masprm.models.tiny import build_tiny_model

    torch.set_num_threads(1)  # the benchmark machine is shared; one thread keeps timings stable
    with tempfile.TemporaryDirectory() as tmp:
        demo = all((REPO / path).is_dir() for path in DEMO.values())
        chosen = {name: getattr(args, name) or (str(REPO / DEMO[name]) if demo else None) for name in DEMO}
        if chosen["gen_model_id"] is None:
            chosen["gen_model_id"] = str(build_tiny_model(Path(tmp) / "tiny", seed=0))
        for role in ("prm_dir", "orm_dir"):
            chosen[role] = chosen[role] or one_step_scorer(Path(tmp) / role, chosen["gen_model_id"])
        cap = args.max_new_tokens or (1024 if demo else 32)
        flags = ["--dataset", "toy", "--split", "test", "--seed", "14", "--sample_n", str(args.sample_n),
                 "--mas_config", str(REPO / "configs/toy.yaml"), "--methods", *METHODS, *DEMO_FLAGS,
                 "--max_new_tokens", str(cap), "--no_compile", "--device_map", "cpu",
                 *(x for name, value in chosen.items() for x in (f"--{name}", value))]
        graph = load_mas_config(REPO / "configs/toy.yaml")
        data = load_examples("toy", "test", n=args.sample_n, seed=14)
        clock = {"seconds": 0.0, "calls": 0, "rows": 0}
        loaded: dict = {}

        def loader(spec):
            key = repr(spec)
            if key not in loaded:
                loaded[key] = Timed(load_model(spec), clock)
            return loaded[key]

        runs = {}
        for size in args.batch_sizes:
            run, settings = parse_command(flags + ["--search_batch_size", str(size)])
            specs = model_specs(settings, run)
            for spec in specs.values():   # load before the clock starts
                loader(spec)
            clock.update(seconds=0.0, calls=0, rows=0)
            start = time.perf_counter()
            conds = run_conditions(list(METHODS), settings, graph, data, specs, logs_dir=f"{tmp}/logs{size}",
                                   loader=loader, announce=lambda m: None)
            wall = time.perf_counter() - start
            files = {p.name: p.read_bytes() for c in conds for p in (c.files.log, c.files.records)}
            runs[size] = {"wall": wall, **clock, "files": files,
                          "acc": {c.method: c.summary["accuracy"] for c in conds}}

    first = args.batch_sizes[0]
    n = args.sample_n * len(METHODS)
    print(f"stage-4 demo conditions on {'the demo models' if demo else 'the tiny model'}: {args.sample_n} toy test "
          f"examples x {len(METHODS)} conditions, <= {cap} new tokens per agent, 1 CPU thread")
    print(f"  {'search_batch_size':<18}{'examples/min':>13}{'speed-up':>10}{'rows/call':>11}{'in model':>10}  logs")
    same_all = True
    for size, r in runs.items():
        same, note = compare(runs[first]["files"], r["files"])
        same_all &= same
        print(f"  {size:<18}{60 * n / r['wall']:>13.1f}{runs[first]['wall'] / r['wall']:>9.2f}x"
              f"{r['rows'] / max(1, r['calls']):>11.1f}{r['seconds'] / r['wall']:>10.1%}  {note}")
    print("  accuracy: " + ", ".join(f"{m} {a:.3f}" for m, a in runs[first]["acc"].items()))
    if not same_all:
        print("FAIL: the logs differ across batch sizes")
        return 1
    return 0


def _floats(obj, out):
    if isinstance(obj, float):
        out.append(obj)
    elif isinstance(obj, dict):
        for v in obj.values():
            _floats(v, out)
    elif isinstance(obj, list):
        for v in obj:
            _floats(v, out)
    return out


def _without_floats(obj):
    if isinstance(obj, float):
        return "float"
    if isinstance(obj, dict):
        return {k: _without_floats(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_without_floats(v) for v in obj]
    return obj


def compare(ref: dict[str, bytes], got: dict[str, bytes]) -> tuple[bool, str]:
    """(same, note): text logs must match byte for byte; records may differ only in score digits.

    A scorer's forward is not bit-identical across batch shapes (float rounding, ~1e-7), so
    the records' raw scores (e.g. SBS beam scores) can differ in their last digits.
    """
    import json

    if ref == got:
        return True, "identical"
    if {k: v for k, v in ref.items() if k.endswith(".txt")} != {k: v for k, v in got.items() if k.endswith(".txt")}:
        return False, "DIFFERENT text logs"
    worst, records = 0.0, 0
    for name in ref:
        for a, b in zip(ref[name].decode().splitlines(), got[name].decode().splitlines()):
            if a == b:
                continue
            ra, rb = json.loads(a), json.loads(b)
            if _without_floats(ra) != _without_floats(rb):
                return False, f"DIFFERENT records ({name})"
            records += 1
            worst = max([worst] + [abs(x - y) for x, y in zip(_floats(ra, []), _floats(rb, []))])
    return worst < 1e-5, f"text logs identical; {records} records differ in score digits only (max {worst:.1e})"


if __name__ == "__main__":
    run_cli(main)
