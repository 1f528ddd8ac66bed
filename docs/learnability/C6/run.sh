#!/bin/bash
# Cell C6 of docs/learnability.md: C4's recipe (step mean, LoRA r 16, lr 2e-3) at 6,400 questions, 3 epochs
# (the amendment of 2026-12-07, 23:51 UTC).
exec bash /work/main/docs/learnability/cell.sh C6 6400 \
  "12,800 records, about 12,288 trained (4% of questions held out): about 768 steps an epoch, 2,304 optimizer steps; at C5's measured 0.21 CPU s a step about 480 CPU s (8 CPU min) of training; passes 12,800 x 0.07 CPU s, about 15 CPU min; benchmark and train-fit about 3 CPU min" \
  --mode prm --epochs 3 --lr 2e-3 --lora-r 16 --lora-alpha 32 --lora-dropout 0.05 --head-read step_mean
