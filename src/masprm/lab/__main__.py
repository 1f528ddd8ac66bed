"""`python -m masprm.lab plan|run|pilot|report ...`: the lab's command (masprm.lab.command), as src/lab.py runs it."""
import sys

from masprm.lab.command import cli

if __name__ == "__main__":
    sys.argv[0] = "masprm-lab"   # its help and error lines name the command, not __main__.py
    cli()
