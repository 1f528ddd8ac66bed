"""`make demo`: the whole pipeline on the toy world; the code is masprm.stages.demo."""
from masprm.stages.demo import cli

if __name__ == "__main__":
    cli()
