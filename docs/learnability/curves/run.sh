#!/bin/bash
# The learning curves of docs/learnability.md as the amendment of 2026-12-08 (00:10 UTC) runs them: stage 1's
# trees of the 400 train questions (seed 42, the lab's settings), stage 2 with every window opened, five label
# sources trained at C4's recipe for 500 optimizer steps each, training seeds 42 7 99 in order; per seed one step
# benchmark on dev holding every source's scorer, train-fit and the label agreement. Resumable: each step is
# skipped when its output exists (stage 1 resumes tree by tree itself; a trainer resumes from its checkpoints).
# Usage: [CURVE_SEEDS="42 7 99"] run.sh (training seeds, in order). Outputs: /tmp/learn/curves (big), docs/learnability/curves (small).
set -u
cd /work/main || exit 1
D=docs/learnability/curves
W=/tmp/learn/curves
mkdir -p "$D" "$W"
OUT=output${CURVE_SEEDS:+_s${CURVE_SEEDS// /_}}.txt   # a run of chosen seeds logs apart, so two runs may share the machine
exec >>"$D/$OUT" 2>&1
export PYTHONPATH=src OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
POL=artifacts/toy_deep/policy
T="/usr/bin/time -f CPU_user_%U_sys_%S_wall_%e"
run() { echo "\$ $*"; $T nice -n 15 .venv/bin/python "$@"; local rc=$?; echo "exit $rc"; return $rc; }
echo "curves, $(date -u +%FT%TZ), commit $(git rev-parse --short HEAD), seeds ${*:-42 7 99}"
RUN=toy_deep_res_train_policy_r40_c4_cand3_t0p7_p0p95
TREES=$W/$RUN
WIN="--prm-root-window -1 1"
run src/run_mcts.py --dataset toy_deep --split train --n 400 --seed 42 --n_rollouts 40 --search_c 4 \
    --n_candidates 3 --temperature 0.7 --top_p 0.95 --mas_config configs/toy_deep.yaml --model_id $POL \
    --search_batch_size 64 --no_plot --no_compile --device_map cpu --out_root $W || exit 1
S=$W/prm_samples_window-1_1_$RUN.jsonl
[ -f "$S" ] || run src/train/preprocess_data.py --input $TREES --target-nodes 9 --view full \
    --mas_config configs/toy_deep.yaml --make-ppm --ppm-root-window -1 1 $WIN || exit 1
for L in step_truth mc; do
  ls $W/labels_${L}*_$RUN.jsonl >/dev/null 2>&1 || run src/train/preprocess_data.py --input $TREES --labels $L \
      --target-nodes 9 --view full --mas_config configs/toy_deep.yaml $WIN || exit 1
done
ls -la $W/*.jsonl
sha256sum $W/*.jsonl
PAIRS=$(ls $W/ppm_pairs*_$RUN.jsonl | head -1)
TRUTH=$(ls $W/labels_step_truth*_$RUN.jsonl | head -1)
MC=$(ls $W/labels_mc*_$RUN.jsonl | head -1)
for pair in "supervised $TRUTH" "masprm $PAIRS" "mc_prm $MC" "orm $S" "implicit $S"; do
  set -- $pair
  [ -f "$D/labelbench_$1.json" ] || [ "$1" = implicit ] || {
    run -m masprm.instruments.labelbench --world toy_deep --trees $TREES --labels $2 --scheme $1 \
        --out $W/labelbench_$1.json && cp $W/labelbench_$1.json "$D/labelbench_$1.json"; }
done
SEEDS=${CURVE_SEEDS:-42 7 99}
RECIPE="--epochs 10 --max-steps 500 --lr 2e-3 --lora-r 16 --lora-alpha 32 --lora-dropout 0.05 --eval-steps 40 \
  --train-batch-size 16 --grad-accum 1 --max-length 256 --quiet"
for seed in $SEEDS; do
  SCORERS=""
  for pair in "supervised prm $TRUTH --head-read step_mean" "masprm ppm $PAIRS" "mc_prm prm $MC --head-read step_mean" \
              "orm orm $S --head-read step_mean" "implicit implicit $S"; do
    set -- $pair
    name=$1 mode=$2 data=$3; shift 3
    out=$W/${name}_s$seed
    [ -f "$out/masprm_scorer.json" ] || run src/train/trainer.py --mode $mode --data_dir $data --model-id $POL \
        --output-dir $out --seed $seed --resume $RECIPE "$@" || exit 1
    [ -f "$D/fit_${name}_s$seed.json" ] || { run -m masprm.instruments.passes --world toy_deep --fit $out \
        --records /tmp/learn/passes_400.jsonl --n 300 --policy src/masprm/worlds/toy_deep/shipped_policy \
        --out $W/fit_${name}_s$seed.json && cp $W/fit_${name}_s$seed.json "$D/fit_${name}_s$seed.json"; }
    SCORERS="$SCORERS --scorer $name=$out"
  done
  B=$W/stepbench_dev_s$seed.json
  [ -f "$B" ] || run -m masprm.instruments.stepbench --world toy_deep --split dev \
      --policy src/masprm/worlds/toy_deep/shipped_policy $SCORERS --seed 42 --out $B || exit 1
  .venv/bin/python -c "import json,sys; r=json.load(open(sys.argv[1])); r.pop('transcripts',None); json.dump(r,open(sys.argv[2],'w'),indent=1)" \
      $B "$D/stepbench_dev_s${seed}_summary.json"
  echo "seed $seed done $(date -u +%FT%TZ)"
done
echo "done $(date -u +%FT%TZ)"
