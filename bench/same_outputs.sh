#!/usr/bin/env bash
# Behaviour unchanged: run the seed README's pipeline (stage 1 -> 2 -> a short stage 3 -> a small stage 4)
# on a tiny local model with one seed, once with the code of REV (default: main) and once with this
# checkout's, and compare the trees, the stage-2 outputs and the stage-4 metric lines byte for byte.
#
#   bash bench/same_outputs.sh [REV] [WORK]      # CPU, a few minutes; exit 0 when everything is identical
set -u
REPO=$(cd "$(dirname "$0")/.." && pwd)
REV=${1:-main}
WORK=${2:-$(mktemp -d -t masprm-same-XXXX)}
PY=${PY:-$REPO/.venv/bin/python}
export PYTHONDONTWRITEBYTECODE=1 HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1
export TOKENIZERS_PARALLELISM=false OMP_NUM_THREADS=1
mkdir -p "$WORK" && WORK=$(cd "$WORK" && pwd)

# The other side's code: an export of REV (nothing of this checkout is touched).
rm -rf "$WORK/code-before" && mkdir -p "$WORK/code-before"
git -C "$REPO" archive "$REV" | tar -x -C "$WORK/code-before" || exit 1

# One tiny model and one data file for both sides.
PYTHONPATH="$REPO/src" "$PY" - "$WORK" <<'PYEOF' || exit 1
import json, sys
from pathlib import Path
from masprm.models.tiny import build_tiny_model
work = Path(sys.argv[1])
if not (work / "tiny").is_dir():
    build_tiny_model(work / "tiny", seed=0)
rows = [{"question": f"Tom has {a} apples and buys {b} more. How many apples does he have?",
         "answer": f"{a} + {b} = {a + b}\n#### {a + b}"} for a, b in [(3, 4), (6, 2), (9, 5), (4, 5), (7, 1), (2, 8)]]
(work / "gsm8k.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
PYEOF

pipeline() {  # $1: code folder, $2: output folder (both sides run in one folder, so recorded paths match)
  local code=$1 out=$2
  rm -rf "$WORK/run" "$out" && mkdir -p "$WORK/run/configs" && cp "$REPO/configs/gsm8k.yaml" "$WORK/run/configs/" \
    && cd "$WORK/run" || return 1
  export PYTHONPATH="$code/src"
  "$PY" "$code/src/run_mcts.py" --dataset gsm8k --split train --n 4 --seed 42 --n_rollouts 2 --search_c 4 \
    --n_candidates 3 --mas_config configs/gsm8k.yaml --load_in_4bit --no_compile \
    --model_id "$WORK/tiny" --data_file "$WORK/gsm8k.jsonl" --max_new_tokens 24 --no_plot > stage1.out 2>&1 || return 1
  local run; run=$(ls results | grep '_res_train_' | head -1)
  "$PY" "$code/src/train/preprocess_data.py" --input "results/$run" --target-nodes 5 --make-ppm --ppm-max-pairs 8 \
    --ppm-pos-topk 4 --ppm-neg-topk 4 --ppm-root-window -1 1 --view full --config configs/gsm8k.yaml > stage2.out 2>&1 || return 1
  "$PY" "$code/src/train/trainer.py" --mode ppm --data_dir "results/ppm_pairs_$run.jsonl" --model-id "$WORK/tiny" \
    --output-dir prm --max-steps 2 --lr 1e-4 --train-batch-size 4 --grad-accum 1 --lora-r 8 --lora-alpha 16 \
    --max-length 128 --eval-steps 2 --seed 42 --quiet --no-hub-logs > stage3.out 2>&1 || return 1
  "$PY" "$code/src/experiments/compare_sbs_mcts.py" --dataset gsm8k --split test --seed 14 \
    --data_file "$WORK/gsm8k.jsonl" --sample_n 2 --gen_model_id "$WORK/tiny" --prm_dir prm \
    --prm_base_model_id "$WORK/tiny" --mas_config configs/gsm8k.yaml \
    --methods single_pass sbs_logprob sbs_prm mcts_logprob mcts_prm --b1 2 --b2 2 --n_simulations 3 \
    --max_children 2 --max_new_tokens 24 --workers 1 --logs_dir logs > stage4.out 2> stage4.err || return 1
  cd "$WORK" && mv "$WORK/run" "$out"
}

status=0
for side in before after; do
  code="$WORK/code-before"; [ "$side" = after ] && code="$REPO"
  echo "== pipeline with the code $side (${side/before/$REV})"
  if ! pipeline "$code" "$WORK/$side"; then
    echo "FAIL: the pipeline stopped; see $WORK/$side/stage*.out"; tail -5 "$WORK/$side"/stage*.out; exit 1
  fi
done

compare() {  # $1: label, then the two files/folders
  if diff -r "$2" "$3" > "$WORK/diff-$1.txt"; then echo "same  $1"; else echo "DIFF  $1 ($WORK/diff-$1.txt)"; status=1; fi
}
compare trees "$WORK/before/results/$(ls "$WORK/before/results" | grep _res_train_ | head -1)" \
              "$WORK/after/results/$(ls "$WORK/after/results" | grep _res_train_ | head -1)"
for f in $(cd "$WORK/before/results" && ls *.jsonl); do compare "stage2-$f" "$WORK/before/results/$f" "$WORK/after/results/$f"; done
# Stage 4: every condition's log (its manifest hash, which includes a hash of the method's source file,
# left out) and the printed results table (the log file names carry the same hash).
metrics() { (cd "$1/logs" && for f in $(ls *.txt | sort); do echo "# ${f%%_[0-9a-f]*}"; sed -E 's/manifest=[0-9a-f]+/manifest=_/' "$f"; done); }
metrics "$WORK/before" > "$WORK/metrics-before.txt"; metrics "$WORK/after" > "$WORK/metrics-after.txt"
compare stage4-logs "$WORK/metrics-before.txt" "$WORK/metrics-after.txt"
grep -v "logs/" "$WORK/before/stage4.out" > "$WORK/table-before.txt"
grep -v "logs/" "$WORK/after/stage4.out" > "$WORK/table-after.txt"
compare stage4-table "$WORK/table-before.txt" "$WORK/table-after.txt"
echo "work folder: $WORK"
exit $status
