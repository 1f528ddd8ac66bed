"""Hugging Face model plumbing: tiny local models, loading options, the policy and scorers.

Submodules import torch/transformers; import them explicitly where needed so
the pure core never pays for (or depends on) those imports.
"""

import logging


class _CpuKernelNoticeFilter(logging.Filter):
    """bitsandbytes logs a warning at import on CPUs with AVX512-BF16 when an optional kernel package
    is not installed; it falls back to its own kernels, so the line is noise, not the user's error."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("Failed to load CPU gemm_4bit_forward from kernels-community")


logging.getLogger("bitsandbytes.backends.cpu.ops").addFilter(_CpuKernelNoticeFilter())
