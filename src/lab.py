"""`make lab`: every label scheme and objective judged side by side on the toy world; the code is masprm.lab.command."""
from masprm.lab.command import cli

if __name__ == "__main__":
    cli()
