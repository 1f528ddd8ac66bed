"""Stage 5: aggregate evaluation logs across seeds.

    python aggregator.py [--logs_dir logs] [--out aggregated_results.csv]
    python aggregator.py --archive archives/toy_demo-v1 --out toy_demo.csv   # a shared run's logs

Reads `<logs_dir>/*.txt`, groups the COMPLETED logs of one experiment (the
file name without its trailing `_<seed>`), writes the CSV of mean/std across
seeds, prints the table, and draws accuracy against model work per example
(policy tokens generated + scorer tokens read, from the summary sidecars), one
line per method through its budgets, next to the CSV (`aggregated_results.png`).
With --archive the logs come from a run archive (`masprm.archive`), checked whole and read from a
temporary copy: --logs_dir then names a logs folder inside it (default: its only one).
"""

from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path

from masprm.archive.read import logs_folders, opened, verified

from masprm.eval.aggregate import aggregate, format_table, read_logs, to_csv
from masprm.eval.budget_plot import plot_results
from masprm.checks import check_csv_output, check_output_file, check_seeds
from masprm.cli import ArgumentParser, check, run_cli
from masprm.config import add_config_args, arg, config_from_args
from masprm.io import atomic_write_text
from masprm.paths import PathText, check_input_dir
from masprm.log import RESULT, get_logger

log = get_logger(__name__)


@dataclass
class AggregateArgs:
    logs_dir: PathText = arg("logs", flags=("--logs_dir",), help="folder of the stage-4 text logs (default logs; "
                             "with --archive: a folder inside the archive, default its only one)")
    archive: PathText | None = arg(None, help="a run archive (masprm-archive) to read the logs from, e.g. "
                                              "archives/toy_demo-v1: someone else's shared run")
    out: PathText = arg("aggregated_results.csv", help="CSV to write (the plot goes next to it)")
    no_plot: bool = arg(False, flags=("--no_plot",), help="do not draw the accuracy/work plot")
    seed: int = arg(42, help="accepted for uniformity; aggregation is not random")

    def __post_init__(self) -> None:
        check_seeds(self)


def main(argv: list[str] | None = None) -> int:
    p = ArgumentParser(description="Aggregate seed-specific evaluation logs into mean/std per experiment.")
    add_config_args(p, AggregateArgs)
    args = config_from_args(AggregateArgs, p.parse_args(argv))
    inside = archived_logs(args) if args.archive else None
    if inside is None:
        check_input_dir(args.logs_dir, "logs_dir")
    check_csv_output(args.out, "out")   # never a log, a manifest or a picture (the CSV would replace it)
    check_output_file(args.out, "--out")
    if not args.no_plot:
        check_output_file(Path(args.out).with_suffix(".png"), "--out (its plot)")
    with opened(args.archive) if inside is not None else nullcontext() as root:
        return write_table(args, str(root / inside) if inside is not None else args.logs_dir)


def archived_logs(args: AggregateArgs) -> str:
    """The logs folder, inside the archive, that --archive and --logs_dir name (the archive checked whole)."""
    check_input_dir(args.archive, "archive")
    folders = logs_folders(verified(args.archive))
    if args.logs_dir in folders:
        return args.logs_dir
    check(args.logs_dir == AggregateArgs.logs_dir and len(folders) == 1,
          f"--logs_dir {args.logs_dir}: not a logs folder of the archive {args.archive} "
          f"(it holds: {', '.join(folders) or 'none'})")
    return folders[0]


def write_table(args: AggregateArgs, logs_dir: str) -> int:
    """The CSV, the table and the plot from the logs in `logs_dir`."""
    logs = read_logs(logs_dir)
    # A log whose numbers cannot be averaged (a value out of range, a metric twice, no seed, a FIFO) is
    # named on stderr and left out, so each row's Seeds count is the number of values averaged.
    broken = [f"{log.experiment}{'' if log.seed is None else f'_{log.seed}'} ({log.problem})"
              for log in logs if log.problem]
    rows, skipped = aggregate(log for log in logs if not log.problem)
    # An empty table would replace the results of an earlier aggregation (and sit beside its old plot).
    check(bool(rows), f"--logs_dir {args.logs_dir}{f' (in {args.archive})' if args.archive else ''}: no COMPLETED logs (*.txt)"
                      f"{f'; {len(skipped)} not finished or FAILED' if skipped else ''}"
                      f"{f'; {len(broken)} cannot be counted: ' + '; '.join(broken) if broken else ''}; nothing written"
                      f"{f', {args.out} left as it was' if Path(args.out).exists() else ''}")
    if broken:
        log.info(f"skipped {len(broken)} log(s) that cannot be counted: {'; '.join(broken)}")
    if skipped:
        log.info(f"skipped {len(skipped)} log(s) that are not COMPLETED: {', '.join(skipped)}", extra=RESULT)
    atomic_write_text(args.out, to_csv(rows))
    log.info(format_table(rows), extra=RESULT)
    log.info(f"wrote {args.out} ({len(rows)} experiment(s))", extra=RESULT)
    if not args.no_plot:
        plot = Path(args.out).with_suffix(".png")
        if plot_results(rows, plot):
            log.info(f"wrote {plot}", extra=RESULT)
    return 0


def cli() -> None:
    """The console script (pyproject.toml) and the checkout's script: one line and exit 2 on a bad input."""
    run_cli(main)


if __name__ == "__main__":
    cli()
