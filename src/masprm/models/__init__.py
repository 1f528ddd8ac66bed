"""Hugging Face model plumbing: tiny local models, loading options, the policy and scorers.

Submodules import torch/transformers; import them explicitly where needed so
the pure core never pays for (or depends on) those imports.
"""
