"""Stage 2: trees -> PRM samples and Bradley-Terry preference pairs; the code is masprm.stages.preprocess."""
from masprm.stages.preprocess import cli

if __name__ == "__main__":
    cli()
