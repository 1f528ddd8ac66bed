"""Stage 5: aggregate evaluation logs across seeds; the code is masprm.stages.aggregate."""
from masprm.stages.aggregate import cli

if __name__ == "__main__":
    cli()
