"""`python -m masprm.lab plan|run|pilot|report ...`: the lab's command (masprm.lab.command), as src/lab.py runs it."""
from masprm.lab.command import cli

if __name__ == "__main__":
    cli()
