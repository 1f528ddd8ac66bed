"""Show a stage-1 search tree as a picture or indented text; the code is masprm.stages.show_tree."""
from masprm.stages.show_tree import cli

if __name__ == "__main__":
    cli()
