#!/bin/bash
# Cell C9 of docs/learnability.md: C6 (C4's recipe at 6,400 questions) at 10 epochs (the amendment of
# 2026-12-08, 01:09 UTC).
exec bash /work/main/docs/learnability/cell.sh C9 6400 \
  "12,800 records, 12,288 trained (4% of questions held out): 768 steps an epoch, 7,680 optimizer steps; at C6's measured 0.27 CPU s a step about 2,070 CPU s (35 CPU min) of training; the passes exist (C6's file); benchmark and train-fit about 3 CPU min" \
  --mode prm --epochs 10 --lr 2e-3 --lora-r 16 --lora-alpha 32 --lora-dropout 0.05 --head-read step_mean
