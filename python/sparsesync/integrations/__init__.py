"""Rollout engines without a fork: patches in checkpoint (HF) coordinates applied straight into a model's
live parameters, through a map recorded once by running the model's own loader.

* :func:`record_weight_map` / :class:`WeightMap` (weight_map.py): where each checkpoint element lands;
* :class:`MappedApplier` (mapped_apply.py): verifies a patch and applies it through the map;
* ``sparsesync.integrations.vllm``: the ``sparsesync`` weight-transfer backend for vLLM (plugin, trainer
  engine, worker extension);
* ``sparsesync.integrations.sglang``: the ``--custom-weight-loader`` entry for SGLang.

These need torch (imported here); the vLLM and SGLang modules import their engines only where present.
docs/INTEGRATIONS.md has the configuration lines, what is verified, memory and limits.
"""

from .mapped_apply import MappedApplier
from .weight_map import Runs, TensorMap, WeightMap, record_weight_map

__all__ = ["MappedApplier", "Runs", "TensorMap", "WeightMap", "record_weight_map"]
