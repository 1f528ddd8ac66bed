"""Stage 2: training labels from the stage-1 trees (outcome-only; no step labels are ever given).

    mining.py   the paper's records: PRM samples (every step's Monte Carlo value) and the
                MASPRM's Bradley-Terry pairs (best vs worst siblings)
"""
