#!/bin/bash
# Cell C8 of docs/learnability.md (amended 2026-12-07): --mode gprm, the LM head read, on C0's 800 passes at C1's settings.
exec bash /work/main/docs/learnability/cell.sh C8 400 \
  "6,400 examples (one a step), 6,144 trained: 384 steps an epoch, 3,840 optimizer steps; measured 0.23 CPU s a step and 32 s to start: about 15 CPU min of training plus 96 evaluations; benchmark and train-fit about 4 CPU min" \
  --mode gprm --epochs 10 --lr 2e-3 --lora-r 16 --lora-alpha 32 --lora-dropout 0.05
