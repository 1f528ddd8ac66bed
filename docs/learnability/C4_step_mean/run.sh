#!/bin/bash
# Cell C4 (step mean) of docs/learnability.md, dev only: C1's recipe (10 epochs, lr 2e-3, LoRA r 16), the head reading
# the mean of a step's positions;
# C0's passes regenerated if missing (same seed, same bytes); one process at a time, one thread each, nice 15.
cd /work/main
export PYTHONPATH=src OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
C=C4_step_mean
T="/usr/bin/time -f CPU_user_%U_sys_%S_wall_%e"
# the instruments and the policy folder are being moved (masprm.toy -> masprm.instruments, worlds/toy_deep):
# each command uses the paths present when it starts
mod() { if [ -f src/masprm/instruments/$1.py ]; then echo masprm.instruments.$1; else echo masprm.toy.$1; fi; }
pol() { if [ -d src/masprm/worlds/toy_deep/shipped_policy ]; then echo src/masprm/worlds/toy_deep/shipped_policy; else echo src/masprm/toy/shipped_policy_deep; fi; }
run() { echo "\$ $*"; $T nice -n 15 .venv/bin/python "$@"; local rc=$?; echo "exit $rc"; return $rc; }
mkdir -p /tmp/learn
[ -f /tmp/learn/passes_400.jsonl ] || run -m $(mod passes) --world toy_deep --n 400 --samples 2 --seed 42 --policy $(pol) --out /tmp/learn/passes_400.jsonl || exit 1
sha256sum /tmp/learn/passes_400.jsonl
run src/train/trainer.py --mode prm --data_dir /tmp/learn/passes_400.jsonl --model-id $(pol) --output-dir /tmp/learn/$C --seed 42 --epochs 10 --eval-steps 40 --lr 2e-3 --train-batch-size 16 --grad-accum 1 --lora-r 16 --lora-alpha 32 --lora-dropout 0.05 --max-length 256 --head-read step_mean --quiet || exit 1
run -m $(mod stepbench) --world toy_deep --split dev --policy $(pol) --scorer supervised=/tmp/learn/$C --seed 42 --out /tmp/learn/${C}_stepbench_dev.json || exit 1
run -m $(mod passes) --world toy_deep --fit /tmp/learn/$C --records /tmp/learn/passes_400.jsonl --n 300 --policy $(pol) --out /tmp/learn/${C}_fit.json || exit 1
