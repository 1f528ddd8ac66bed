"""Stage 1: MAS-MCTS trees for training; the code is masprm.stages.trees."""
from masprm.stages.trees import cli

if __name__ == "__main__":
    cli()
