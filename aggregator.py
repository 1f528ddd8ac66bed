"""Stage 5: aggregate evaluation logs across seeds.

    python aggregator.py [--logs_dir logs] [--out aggregated_results.csv]

Reads `<logs_dir>/*.txt`, groups the COMPLETED logs of one experiment (the
file name without its trailing `_<seed>`), writes the CSV of mean/std across
seeds, prints the table, and draws accuracy against generated tokens next to
the CSV (`aggregated_results.png`).
"""

from pathlib import Path

from masprm.aggregate import aggregate, format_table, plot_results, read_logs, to_csv
from masprm.checks import check_output_file
from masprm.cli import ArgumentParser, check, run_cli
from masprm.io import atomic_write_text


def main() -> int:
    p = ArgumentParser(description="Aggregate seed-specific evaluation logs into mean/std per experiment.")
    p.add_argument("--logs_dir", default="logs", help="folder of the stage-4 text logs (default logs)")
    p.add_argument("--out", default="aggregated_results.csv", help="CSV to write (the plot goes next to it)")
    p.add_argument("--no_plot", action="store_true", help="do not draw the accuracy/tokens plot")
    p.add_argument("--seed", type=int, default=42, help="accepted for uniformity; aggregation is not random")
    args = p.parse_args()
    check(Path(args.logs_dir).is_dir(), f"--logs_dir {args.logs_dir}: no such folder")
    check_output_file(args.out, "--out")
    if not args.no_plot:
        check_output_file(Path(args.out).with_suffix(".png"), "--out (its plot)")

    rows, skipped = aggregate(read_logs(args.logs_dir))
    # An empty table would replace the results of an earlier aggregation (and sit beside its old plot).
    check(bool(rows), f"--logs_dir {args.logs_dir}: no COMPLETED logs (*.txt)"
                      f"{f'; {len(skipped)} not finished or FAILED' if skipped else ''}; nothing written"
                      f"{f', {args.out} left as it was' if Path(args.out).exists() else ''}")
    if skipped:
        print(f"skipped {len(skipped)} log(s) that are not COMPLETED: {', '.join(skipped)}")
    atomic_write_text(args.out, to_csv(rows))
    print(format_table(rows))
    print(f"wrote {args.out} ({len(rows)} experiment(s))")
    if not args.no_plot:
        plot = Path(args.out).with_suffix(".png")
        if plot_results(rows, plot):
            print(f"wrote {plot}")
    return 0


if __name__ == "__main__":
    run_cli(main)
