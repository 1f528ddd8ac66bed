#!/bin/bash
# toy_deep's seconds per condition for `lab --dry_run` (lab_estimate.DEEP_SECONDS): user CPU seconds of each
# search condition on N dev questions (search seed 14, one thread, the lab's settings), and of a start-up run on
# one question; per condition (user - start-up) / N x 423 is its seconds on the test split.
#   bash bench/deep_costs.sh [N]        # after `make demo WORLD=toy_deep` and the lab's mc+prm scorer
set -euo pipefail
N=${1:-60}
OUT=$(mktemp -d)
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 ATEN_CPU_CAPABILITY=avx2 MKL_CBWR=AVX2
PY=${PYTHON:-.venv/bin/python}
COMMON=(--dataset toy_deep --split dev --seeds 14 --gen_model_id artifacts/toy_deep/policy
        --mas_config configs/toy_deep.yaml --b1 3 --b2 5 --n_simulations 10 --max_children 3 --c_uct 2
        --sbs_temperature 0.7 --mcts_temperature 0.7 --top_p 0.95 --logs_dir "$OUT/logs" --workers 1
        --search_batch_size 128 --no_compile --device_map cpu --step_oracle toy_deep --bon_n 8)
PRM=(--prm_dir checkpoints/toy_deep-lab-mc-prm --prm_base_model_id artifacts/toy_deep/policy)
ORM=(--orm_dir checkpoints/toy_deep-orm --orm_base_model_id artifacts/toy_deep/policy)
run() {   # name, flags...: one line "name user S wall S"
  local name=$1; shift
  /usr/bin/time -f "$name user %U wall %e" "$PY" src/experiments/compare_sbs_mcts.py "${COMMON[@]}" "$@" \
    > "$OUT/$name.out" 2>&1 || { tail -3 "$OUT/$name.out"; exit 1; }
  tail -1 "$OUT/$name.out"
}
run startup --methods single_pass --sample_n 1 --step_agg min
rm -rf "$OUT/logs"
run single_pass --methods single_pass --sample_n "$N" --step_agg min
run sbs_prm "${PRM[@]}" --methods sbs_prm --sample_n "$N" --step_agg min
run mcts_prm "${PRM[@]}" --methods mcts_prm --pw_k 3 --sample_n "$N" --step_agg min
run mcts_oracle_step --methods mcts_oracle_step --pw_k 3 --sample_n "$N" --step_agg min
run bon_draw --methods bon_logprob --sample_n "$N" --step_agg min
run bon_min "${PRM[@]}" --methods bon_prm --sample_n "$N" --step_agg min
run bon_last "${ORM[@]}" --methods bon_orm --sample_n "$N" --step_agg last
rm -rf "$OUT"
