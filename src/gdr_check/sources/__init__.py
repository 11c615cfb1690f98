"""Checkpoint readers: config.json, safetensors indexes and headers, the Hugging Face cache.

Metadata only: tensor data is never read, nothing is unpickled, and neither torch, triton nor numpy is
imported. Every input that cannot be read raises `SourceError` with a GDR0xx code
(`gdr_check.sources.rules`).
"""

from ..base.report import KeyLocation
from ..base.source_error import SourceError
from .checkpoint import Checkpoint, TensorInfo
from .discover import ExcludePatterns, expand_targets, find_checkpoints, is_checkpoint_dir, is_excluded
from .open import open_checkpoint

__all__ = [
    "Checkpoint", "ExcludePatterns", "KeyLocation", "SourceError", "TensorInfo", "expand_targets",
    "find_checkpoints", "is_checkpoint_dir", "is_excluded", "open_checkpoint",
]
