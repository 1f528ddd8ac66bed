#!/bin/bash
# Cell C5 of docs/learnability.md: C4's recipe (step mean, LoRA r 16, lr 2e-3) at 1,600 questions, 3 epochs.
exec bash /work/main/docs/learnability/cell.sh C5 1600 \
  "3,200 records, 3,072 trained (4% of questions held out): 192 steps an epoch, 576 optimizer steps; at the design's 2.3 CPU s a step 1,325 CPU s (22 CPU min) of training, an upper bound (one thread: about 0.2 s a step); passes 3,200 x 0.2 CPU s, about 11 CPU min; benchmark and train-fit about 3 CPU min" \
  --mode prm --epochs 3 --lr 2e-3 --lora-r 16 --lora-alpha 32 --lora-dropout 0.05 --head-read step_mean
