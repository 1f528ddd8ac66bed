#!/usr/bin/env bash
# The prepared GPU check: the CUDA paths that CPU tests can only emulate, on local models, no network.
#
#   bash bench/gpu_check.sh [WORK_DIR]      (or: make gpu-check)
#
# Builds a tiny and a ~0.1B random model locally, then runs: the seed README's smoke test with
# --load_in_4bit; in-process checks (4-bit policy vs bf16/fp16 log-probs, torch.compile keeps
# logits_to_keep, QLoRA biases stay fp32); a short QLoRA ppm training (plain python, then torchrun on
# every GPU); a stage-4 run with compile on and the scorer in its default 4-bit; stage 1 on Ray with two
# actors of half a GPU each; batched-generation throughput. Each step has its own time limit; the whole
# check is meant to finish in under 8 minutes. Prints PASS/FAIL per step, exits 1 if any failed.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
[ -x "$PY" ] || PY=python3
PY=$(command -v "$PY"); case $PY in /*) ;; *) PY="$PWD/$PY" ;; esac  # absolute: the steps run in $WORK
WORK=${1:-$(mktemp -d -t masprm-gpu-check-XXXX)}
mkdir -p "$WORK" && WORK=$(cd "$WORK" && pwd)
# src: the package without an install; tests: the shared test helpers the checks reuse
export PYTHONPATH=src:tests HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
NGPU=$("$PY" -c "import torch; print(torch.cuda.device_count() if torch.cuda.is_available() else 0)" 2>/dev/null || echo 0)
TORCHRUN="$(dirname "$PY")/torchrun"; [ -x "$TORCHRUN" ] || TORCHRUN=torchrun
START=$SECONDS
RESULTS=()

step() {  # step NAME LIMIT_SECONDS COMMAND...: run with a time limit, keep its output in $WORK/NAME.log
  local name=$1 limit=$2; shift 2
  echo; echo "== $name (limit ${limit}s, at $((SECONDS - START))s)"
  local t0=$SECONDS
  timeout "$limit" "$@" > "$WORK/$name.log" 2>&1
  local rc=$?
  grep -v -e "Loading weights" -e "it/s]" "$WORK/$name.log" | tail -n 25
  local verdict=PASS; [ $rc -eq 0 ] || verdict="FAIL (exit $rc)"
  RESULTS+=("$(printf '%-14s %-16s %4ss' "$name" "$verdict" $((SECONDS - t0)))")
  return $rc
}

expect() {  # expect NAME PATTERN: the step's log must contain PATTERN
  if ! grep -q -e "$2" "$WORK/$1.log"; then
    echo "  FAIL $1: expected '$2' in its output"; RESULTS+=("$(printf '%-14s FAIL (no "%s")' "$1" "$2")")
  fi
}

refuse() {  # refuse NAME PATTERN: the step's log must not contain PATTERN
  if grep -q -e "$2" "$WORK/$1.log"; then
    echo "  FAIL $1: unexpected '$2' in its output"; RESULTS+=("$(printf '%-14s FAIL ("%s")' "$1" "$2")")
  fi
}

echo "MASPRM GPU check in $WORK with $PY ($NGPU GPU(s))"
step device 60 "$PY" bench/gpu_check.py device
step setup 120 "$PY" bench/gpu_check.py setup "$WORK"
cd "$WORK" || exit 1
REPO=$OLDPWD
export PYTHONPATH="$REPO/src"

# The seed README's smoke test, verbatim, on the local tiny model and data.
step smoke 120 "$PY" "$REPO/src/run_mcts.py" --dataset gsm8k --split train --n 2 --seed 42 --n_rollouts 2 --search_c 4 \
  --n_candidates 3 --mas_config configs/gsm8k.yaml --load_in_4bit --no_compile \
  --model_id "$WORK/tiny" --data_file "$WORK/gsm8k.jsonl" --max_new_tokens 24 --no_plot
expect smoke "wrote 2 trees"
refuse smoke "running on CPU"

step policy 150 "$PY" "$REPO/bench/gpu_check.py" policy "$WORK"
step qlora-bias 60 "$PY" "$REPO/bench/gpu_check.py" qlora "$WORK"

TRAIN=(--mode ppm --data_dir "$WORK/pairs.jsonl" --model-id "$WORK/tiny" --max-steps 8 --lr 1e-4
       --train-batch-size 8 --grad-accum 1 --lora-r 8 --lora-alpha 16 --max-length 128 --eval-steps 4)
step train 150 "$PY" "$REPO/src/train/trainer.py" "${TRAIN[@]}" --output-dir "$WORK/prm"
expect train "saved ppm scorer"
expect train "QLoRA (4-bit base)"
if [ "$NGPU" -ge 2 ]; then expect train "training on 1 of the $NGPU visible GPUs"; fi
# Data parallel through torchrun: one process per GPU (a single GPU still runs NCCL and the DDP wrapper).
step torchrun 180 "$TORCHRUN" --standalone --nproc_per_node "$NGPU" "$REPO/src/train/trainer.py" "${TRAIN[@]}" \
  --output-dir "$WORK/prm-ddp"
expect torchrun "saved ppm scorer"

# Stage 4 with torch.compile on (the default) and the scorer in its default precision (4-bit on CUDA).
step stage4 240 "$PY" "$REPO/src/experiments/compare_sbs_mcts.py" --dataset gsm8k --split test --seed 14 \
  --data_file "$WORK/gsm8k.jsonl" --sample_n 2 --gen_model_id "$WORK/tiny" --prm_dir "$WORK/prm" \
  --mas_config configs/gsm8k.yaml --methods single_pass sbs_prm --b1 3 --b2 5 --max_new_tokens 24 \
  --workers 1 --logs_dir "$WORK/logs"
refuse stage4 "torch.compile failed"
"$PY" -c "
import glob, json, sys
m = [json.load(open(p)) for p in glob.glob('$WORK/logs/*sbs_prm*.manifest.json')]
q = bool(m) and m[0]['definition']['models']['prm']['load_in_4bit']
print('  sbs_prm scorer loaded in 4-bit:', q); sys.exit(not q)" || RESULTS+=("stage4-scorer  FAIL (not 4-bit)")

# Stage 1 on Ray: two actors sharing one GPU.
step ray 180 "$PY" "$REPO/src/run_mcts.py" --dataset gsm8k --split train --n 4 --seed 42 --n_rollouts 2 --search_c 4 \
  --n_candidates 2 --mas_config configs/gsm8k.yaml --load_in_4bit --no_compile --model_id "$WORK/tiny" \
  --data_file "$WORK/gsm8k.jsonl" --max_new_tokens 16 --no_plot --ray --gpus_per_actor 0.5 --actors 2 \
  --out_root "$WORK/ray-results"
expect ray "wrote 4 trees"

step throughput 150 "$PY" "$REPO/bench/gpu_check.py" throughput "$WORK"

echo; echo "== summary ($((SECONDS - START)) s in all; logs in $WORK)"
printf '%s\n' "${RESULTS[@]}"
printf '%s\n' "${RESULTS[@]}" | grep -q FAIL && exit 1
exit 0
