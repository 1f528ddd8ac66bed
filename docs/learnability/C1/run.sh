#!/bin/bash
# Cell C1 of docs/learnability.md, dev only: C0's recipe at 10 epochs (C0's passes regenerated: same seed, same
# bytes); one process at a time, one thread each, nice 10.
cd /work/main
export PYTHONPATH=src OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
P=src/masprm/toy/shipped_policy_deep
T="/usr/bin/time -f CPU_user_%U_sys_%S_wall_%e"
run() { echo "\$ $*"; $T nice -n 10 .venv/bin/python "$@"; echo "exit $?"; }
mkdir -p /tmp/learn
[ -f /tmp/learn/passes_400.jsonl ] || run -m masprm.toy.passes --world toy_deep --n 400 --samples 2 --seed 42 --policy $P --out /tmp/learn/passes_400.jsonl
sha256sum /tmp/learn/passes_400.jsonl
run src/train/trainer.py --mode prm --data_dir /tmp/learn/passes_400.jsonl --model-id $P --output-dir /tmp/learn/C1 --seed 42 --epochs 10 --eval-steps 40 --lr 2e-3 --train-batch-size 16 --grad-accum 1 --lora-r 16 --lora-alpha 32 --lora-dropout 0.05 --max-length 256 --quiet
run -m masprm.toy.stepbench --world toy_deep --split dev --policy $P --scorer supervised=/tmp/learn/C1 --seed 42 --out /tmp/learn/C1_stepbench_dev.json
run -m masprm.toy.passes --world toy_deep --fit /tmp/learn/C1 --records /tmp/learn/passes_400.jsonl --n 300 --policy $P --out /tmp/learn/C1_fit.json
