#!/bin/bash
# One cell of docs/learnability.md, dev only: the passes, the training, the step benchmark on dev, train-fit.
# Usage: cell.sh CELL QUESTIONS "PRICE LINE" TRAINER_FLAGS...
#   CELL        the cell's folder under docs/learnability/ (its output.txt and small JSON results land there)
#   QUESTIONS   train questions of the passes file (2 fresh passes each, seed 42; regenerated if missing, the same
#               bytes for the same size)
#   PRICE LINE  printed first (the trainer has no --dry_run)
#   TRAINER_FLAGS the cell's own: --mode, --epochs, --lr, the adapter, --head-read ...
# BACKBONE (environment, optional): the scorer's base model folder (default: the shipped policy, $POL below).
# Every command: one thread, nice 15, /usr/bin/time; the scorer and the full reports stay in /tmp/learn.
set -u
C=$1 N=$2 PRICE=$3
shift 3
cd /work/main || exit 1
D=docs/learnability/$C
mkdir -p "$D" /tmp/learn
exec >"$D/output.txt" 2>&1
export PYTHONPATH=src OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
POL=src/masprm/worlds/toy_deep/shipped_policy
P=/tmp/learn/passes_$N.jsonl
T="/usr/bin/time -f CPU_user_%U_sys_%S_wall_%e"
run() { echo "\$ $*"; $T nice -n 15 .venv/bin/python "$@"; local rc=$?; echo "exit $rc"; return $rc; }
echo "cell $C, $(date -u +%FT%TZ), commit $(git rev-parse --short HEAD)"
echo "price: $PRICE"
[ -f "$P" ] || run -m masprm.instruments.passes --world toy_deep --n "$N" --samples 2 --seed 42 --policy $POL --out "$P" || exit 1
sha256sum "$P"
run src/train/trainer.py --data_dir "$P" --model-id "${BACKBONE:-$POL}" --output-dir /tmp/learn/$C --seed 42 --eval-steps 40 \
    --train-batch-size 16 --grad-accum 1 --max-length 256 --quiet "$@" || exit 1
.venv/bin/python -c "import json,sys; m=json.load(open(sys.argv[1])); print(json.dumps({k: m.get(k) for k in ('objective', 'train_examples', 'eval_examples', 'best_checkpoint', 'eval_metrics')}))" /tmp/learn/$C/masprm_scorer.json
run -m masprm.instruments.stepbench --world toy_deep --split dev --policy $POL --scorer supervised=/tmp/learn/$C \
    --seed 42 --out /tmp/learn/${C}_stepbench_dev.json || exit 1
run -m masprm.instruments.passes --world toy_deep --fit /tmp/learn/$C --records "$P" --n 300 --policy $POL \
    --out /tmp/learn/${C}_fit.json || exit 1
cp /tmp/learn/${C}_fit.json "$D/fit.json"
# the benchmark's report without its transcripts, and the gate's three counts
.venv/bin/python - /tmp/learn/${C}_stepbench_dev.json "$D/stepbench_dev_summary.json" "$D/fit.json" <<'EOF'
import json, sys
report = json.load(open(sys.argv[1]))
report.pop("transcripts", None)
json.dump(report, open(sys.argv[2], "w"), indent=1)
fit = json.load(open(sys.argv[3]))["auc_by_agent"]
row, lp = report["scorers"]["supervised"], report["scorers"]["logprob"]
dev = {a: v for a, v in row["auc_by_agent"].items() if v is not None}
mean = sum(dev.values()) / len(dev)
below = [a for a, v in dev.items() if lp["auc_by_agent"][a] < 0.9 and v < lp["auc_by_agent"][a]]
gap = sum(abs(fit[a] - dev[a]) for a in dev) / len(dev)
print(f"dev mean {mean:.3f}; below the log-prob at {len(below)} agents ({', '.join(below)}); "
      f"mean |train-fit - dev| {gap:.3f}; train-fit mean {sum(fit[a] for a in dev) / len(dev):.3f}; "
      f"outcome AUC {row.get('outcome_auc')}")
print("gate:", "pass" if mean >= 0.85 and not below and gap <= 0.05 else "fail")
EOF
echo "done $(date -u +%FT%TZ)"
