"""`python -m masprm.archive`: the `masprm-archive` command."""

import sys

from masprm.archive.cli import cli

if __name__ == "__main__":
    sys.argv[0] = "masprm-archive"   # its error lines name the command, not __main__.py
    cli()
