"""The pipeline's commands, one module each with ``main(argv)`` and the console script ``cli()``.

    trees.py       stage 1  masprm-mcts        (src/run_mcts.py)
    preprocess.py  stage 2  masprm-preprocess  (src/train/preprocess_data.py)
    train.py       stage 3  masprm-train       (src/train/trainer.py)
    evaluate.py    stage 4  masprm-eval        (src/experiments/compare_sbs_mcts.py)
    aggregate.py   stage 5  masprm-aggregate   (aggregator.py)
    show_tree.py            masprm-show-tree   (src/show_tree.py)
    demo.py                 masprm-demo        (src/demo.py, make demo)
    export_scorer.py        masprm-export-scorer  (a scorer merged and/or pushed to the hub; docs/sharing.md)
    lab.py                  masprm-lab         (src/lab.py, make lab)

The scripts in parentheses are a checkout's three-line shims, so the seed
README's ``python src/...`` commands run the same code.
"""
