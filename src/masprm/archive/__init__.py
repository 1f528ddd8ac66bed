"""Versioned archives of a run's outputs, laid out as Hugging Face dataset repositories (docs/sharing.md).

    python -m masprm.archive pack toy_demo logs/toy_demo results/toy_stepbench.json --out archives
    masprm-archive verify archives/toy_demo-v1
    masprm-archive unpack archives/toy_demo-v1 --to .
    masprm-archive list archives
    masprm-archive push archives/toy_demo-v1 --repo_id USER/toy-demo

`format`: the files an archive may hold, its manifest and dataset card; `pack`: packing; `read`: verify, unpack, a
checked temporary copy (`opened`); `cli`: the command. Pure Python: no torch.
"""
