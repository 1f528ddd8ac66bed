"""masprm-export-scorer: share a trained scorer folder as a standalone model and/or on the Hugging Face Hub.

    masprm-export-scorer checkpoints/MASPRM-GSM8K-1.5B --merged exports/MASPRM-GSM8K-1.5B-merged
    masprm-export-scorer checkpoints/MASPRM-GSM8K-1.5B --push_to_hub --hub_model_id me/masprm-gsm8k

``--merged OUT`` writes the LoRA adapter merged into its base model (fp32): a
transformers token-classification model with the tokenizer, masprm_scorer.json
and its model card, loadable without peft. ``--push_to_hub`` uploads the merged
folder when one is written, else the scorer folder itself (without checkpoints
or training logs), with a model card that names ``--hub_model_id``; the scorer
folder on disk is left as it is. Bad input fails in one line, exit 2, before any
model loads; a failed upload says so in one line, exit 1 (docs/sharing.md).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from masprm.cli import ArgumentParser, check, run_cli
from masprm.config import add_config_args, arg, config_from_args
from masprm.paths import PathText
from masprm.log import RESULT, get_logger
from masprm.train.config import NEEDS_PUSH

log = get_logger(__name__)


@dataclass
class ExportArgs:
    scorer: PathText = arg(positional=True, help="a scorer folder written by stage 3 (masprm-train)")
    merged: PathText | None = arg(None, help="write the adapter merged into its base model as a standalone model "
                                        "in this new folder")
    base_model_id: str | None = arg(None, flags=("--base_model_id",),
                                    help="the base model (hub id or local folder) when the one the adapter names "
                                         "is not here (default: the adapter's)")
    push_to_hub: bool = arg(False, flags=("--push_to_hub",),
                            help="upload the merged folder (with --merged) or the scorer folder to the hub")
    hub_model_id: str | None = arg(None, flags=("--hub_model_id",),
                                   help="the hub repository, 'user/name' or 'org/name' (needed by --push_to_hub)")
    hub_private_repo: bool = arg(False, flags=("--hub_private_repo",), needs=NEEDS_PUSH,
                                 help="create the hub repository as private (--push_to_hub)")


def build_parser() -> ArgumentParser:
    p = ArgumentParser(description="Merge a LoRA scorer into a standalone model and/or upload a scorer to the "
                                   "Hugging Face Hub, with its model card.")
    add_config_args(p, ExportArgs)
    return p


def main(argv: list[str] | None = None) -> int:
    args = config_from_args(ExportArgs, build_parser().parse_args(argv))
    check(bool(args.merged or args.push_to_hub), "nothing to do: give --merged OUT and/or --push_to_hub")
    check(not args.push_to_hub or bool(args.hub_model_id), "--push_to_hub needs --hub_model_id (user/name)")
    from masprm.scorer_meta import read_scorer_meta, text_style
    from masprm.train.card import model_card
    from masprm.train.export import check_merged_out
    from masprm.train.hub import HubUploadError, check_hub_model_id, push_scorer

    if args.hub_model_id:
        check_hub_model_id(args.hub_model_id)
    if args.merged:
        check_merged_out(args.merged, inputs={"scorer": args.scorer, "base_model_id": args.base_model_id})
    status = read_scorer_meta(args.scorer).get("status") if Path(args.scorer).is_dir() else None
    check(status in (None, "completed"), f"scorer {args.scorer}: its training did not finish (masprm_scorer.json "
                                         f"says status {status!r}); finish it with --resume before exporting it")
    from masprm.models.scorer import resolve_scorer_folder   # imports torch: after the cheap checks

    source = resolve_scorer_folder(args.scorer, setting="scorer")
    text_style(read_scorer_meta(source), source, "scorer")   # a record that does not say it is refused, as in stage 4
    folder = source
    if args.merged:
        from masprm.train.export import merge_scorer

        folder = merge_scorer(source, args.merged, base_model_id=args.base_model_id,
                              hub_model_id=args.hub_model_id)
        log.info(f"wrote the merged scorer to {folder}", extra=RESULT)
    if args.push_to_hub:
        meta = read_scorer_meta(folder)
        card = model_card(meta, hub_model_id=args.hub_model_id, merged=bool(args.merged))
        try:
            push_scorer(folder, args.hub_model_id, private=args.hub_private_repo, card=card)
        except HubUploadError as err:
            print(f"{Path(sys.argv[0]).name}: error: {err}", file=sys.stderr)
            return 1
    return 0


def cli() -> None:
    """The console script (pyproject.toml): one line and exit 2 on a bad input."""
    run_cli(main)


if __name__ == "__main__":
    cli()
