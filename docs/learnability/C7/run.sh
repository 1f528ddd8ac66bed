#!/bin/bash
# Cell C7 of docs/learnability.md: C4's recipe (step mean, LoRA r 16, lr 2e-3, 10 epochs) on toy_deep's scorer
# backbone (4 layers x 128 wide, src/masprm/worlds/toy_deep/shipped_scorer) at 400 questions, on C0's passes
# (the amendment of 2026-12-07, 23:51 UTC).
BACKBONE=src/masprm/worlds/toy_deep/shipped_scorer exec bash /work/main/docs/learnability/cell.sh C7 400 \
  "800 records, 768 trained: 48 steps an epoch, 480 optimizer steps (C4's); the backbone costs about 3 times the policy a step (its build: 4.8 steps a second against the policy's 14.8), so about 3 x C4's 103 CPU s, 5 CPU min of training; benchmark and train-fit about 4 CPU min" \
  --mode prm --epochs 10 --lr 2e-3 --lora-r 16 --lora-alpha 32 --lora-dropout 0.05 --head-read step_mean
