"""Memory of --train-new-token-only against the full trainable embedding copy, at Qwen2.5-1.5B's shape.

    nice -n 10 python bench/bench_new_token_only.py [--layers 1] [--device cpu]

A random Qwen2 token scorer with the real embedding (151,936 x 1,536) and real
layer shapes, `--layers` of them (the embedding is what differs, so one layer
shows the saving), the separator added as a new token, LoRA r=256 attached as
the trainer does; then one AdamW step on a 64-token batch. Prints, for each
way, the trainable parameters, the training state they need (fp32 weight,
gradient and two Adam moments: 16 bytes each) and the process's peak memory
(CPU: peak RSS of a fresh subprocess; CUDA: torch's peak allocation).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys


def one_way(new_token_only: bool, layers: int, device: str) -> dict:
    import torch
    from transformers import Qwen2Config, Qwen2ForTokenClassification

    from masprm.train.lora import attach_lora

    torch.manual_seed(0)
    config = Qwen2Config(vocab_size=151936, hidden_size=1536, intermediate_size=8960, num_hidden_layers=layers,
                         num_attention_heads=12, num_key_value_heads=2, num_labels=1, tie_word_embeddings=True)
    model = Qwen2ForTokenClassification(config)
    n_tokens = 151665   # Qwen2.5's tokenizer
    model.resize_token_embeddings(n_tokens + 1)   # + the separator, as the trainer (main's convention)
    model = attach_lora(model, r=256, alpha=32, dropout=0.05, quantized=False,
                        new_token_ids=[n_tokens] if new_token_only else None).to(device)
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    if device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
    optim = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-5)
    ids = torch.randint(0, n_tokens + 1, (1, 64), device=device)
    model(input_ids=ids).logits.sum().backward()
    optim.step()
    peak = (torch.cuda.max_memory_allocated() if device.startswith("cuda")
            else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
    return {"new_token_only": new_token_only, "trainable_params": trainable,
            "training_state_gib": round(trainable * 16 / 2**30, 3), "peak_gib": round(peak / 2**30, 3)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=1)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--one", choices=("full", "row"), help=argparse.SUPPRESS)   # the subprocess's own way
    args = ap.parse_args()
    if args.one:
        print(json.dumps(one_way(args.one == "row", args.layers, args.device)))
        return 0
    for way in ("full", "row"):   # each in a fresh process, so one peak does not hide the other
        done = subprocess.run([sys.executable, __file__, "--one", way, "--layers", str(args.layers),
                               "--device", args.device], capture_output=True, text=True, check=True)
        print(done.stdout.strip())
    return 0


if __name__ == "__main__":
    sys.exit(main())
