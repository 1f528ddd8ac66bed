"""`make lab`: every label scheme and objective judged side by side on a toy world; the code is masprm.lab.command.

    python src/lab.py plan|run|pilot|report ...   (or today's flags: --dry_run, --pilot, --report_from; none: run)
"""
from masprm.lab.command import cli

if __name__ == "__main__":
    cli()
