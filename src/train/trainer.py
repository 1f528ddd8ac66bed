"""Stage 3: train a MASPRM (ppm), a per-step PRM (prm) or an ORM (orm) scorer; the code is masprm.stages.train."""
from masprm.stages.train import cli

if __name__ == "__main__":
    cli()
