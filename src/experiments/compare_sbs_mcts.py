"""Stage 4: search methods and scorers compared, one logged condition per method; the code is masprm.stages.evaluate."""
from masprm.stages.evaluate import cli

if __name__ == "__main__":
    cli()
