"""Run-folder names of stage 1.

A tree folder's name records what produced it, so a folder is never mixed
up with another run's settings and later stages can read the dataset back:

    {dataset_tag}_res_{split}_{model_tag}_r{n_rollouts}_c{c}_cand{n_candidates}_t{temperature}_p{top_p}[_mnt{N}]

e.g. ``gsm8k_res_train_Qwen_Qwen2.5-1.5B-Instruct_r40_c4_cand3_t0p7_p0p95``.
Pure Python.
"""

from __future__ import annotations

from pathlib import Path

RUN_MARKER = "_res_"


def format_number(x: float) -> str:
    """``%g`` with the dot spelled ``p``: 4.0 -> '4', 0.7 -> '0p7', 0.95 -> '0p95'."""
    return ("%g" % x).replace(".", "p")


def model_tag(model_id: str) -> str:
    """A hub id with '/' -> '_'; a local directory -> its last path component."""
    path = Path(model_id).expanduser()
    if path.is_dir():
        return path.resolve().name
    return model_id.strip("/").replace("/", "_")


def default_config_path(dataset: str) -> str:
    return f"configs/{dataset}.yaml"


def dataset_tag(dataset: str, mas_config: str | None = None) -> str:
    """The dataset name, or the config's stem when the run used another team.

    A stem that already starts with ``<dataset>_`` (gsm8k_refine) is used as
    is; any other differing stem is appended (gsm8k + single -> gsm8k_single).
    """
    stem = Path(mas_config).stem if mas_config else dataset
    if stem == dataset or stem.startswith(f"{dataset}_"):
        return stem
    return f"{dataset}_{stem}"


def dataset_tag_of_run(folder: str | Path) -> str:
    """The part of a run folder's name before ``_res_`` (stage 2 derives its config from it)."""
    name = Path(folder).name
    if RUN_MARKER not in name:
        raise ValueError(f"{name!r} is not a stage-1 run folder name (no {RUN_MARKER!r})")
    return name.split(RUN_MARKER, 1)[0]


def run_folder_name(dataset: str, split: str, model_id: str, n_rollouts: int, c: float,
                    n_candidates: int, temperature: float, top_p: float,
                    mas_config: str | None = None, max_new_tokens: int | None = None) -> str:
    """The folder name; a ``--max_new_tokens`` cap changes the trees, so it is added (``_mnt256``) when set."""
    return (
        f"{dataset_tag(dataset, mas_config)}{RUN_MARKER}{split}_{model_tag(model_id)}"
        f"_r{n_rollouts}_c{format_number(c)}_cand{n_candidates}"
        f"_t{format_number(temperature)}_p{format_number(top_p)}"
        + (f"_mnt{max_new_tokens}" if max_new_tokens is not None else "")
    )
