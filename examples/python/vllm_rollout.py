"""A trainer driving a vLLM rollout engine through the `sparsesync` weight-transfer backend (no fork).

Needs vllm, transformers and this package (`pip install .`: its vllm.general_plugins entry point registers
the backend in every vLLM process). docs/INTEGRATIONS.md explains the mapping and what is verified.

    python examples/python/vllm_rollout.py Qwen/Qwen2.5-0.5B-Instruct
"""

import sys

import torch
from transformers import AutoModelForCausalLM
from vllm import LLM, SamplingParams
from vllm.config import WeightTransferConfig

from sparsesync.integrations.worker import PatchMaker

model_name = sys.argv[1] if len(sys.argv) > 1 else "Qwen/Qwen2.5-0.5B-Instruct"
policy = AutoModelForCausalLM.from_pretrained(model_name, torch_dtype=torch.bfloat16)
# named_parameters, not state_dict: a tied lm_head appears once (as the checkpoint has it)
weights = lambda: {n: p.detach() for n, p in policy.named_parameters()}  # checkpoint (HF) names

# The engine starts from the same checkpoint, so the first patch is already sparse (base=).
llm = LLM(model_name, weight_transfer_config=WeightTransferConfig(backend="sparsesync"))
maker = PatchMaker(PatchMaker.layout_entries(weights()), base=weights(), values="ulp")
llm.collective_rpc("init_weight_transfer_engine", args=({"layout": maker.layout.entries()},))

opt = torch.optim.AdamW(policy.parameters(), lr=1e-6)
for step in range(3):
    out = llm.generate(["The capital of France is"], SamplingParams(max_tokens=8, temperature=0))
    print(step, out[0].outputs[0].text)
    loss = policy(**{"input_ids": torch.tensor([[1, 2, 3, 4]]), "labels": torch.tensor([[1, 2, 3, 4]])}).loss
    loss.backward()
    opt.step()
    opt.zero_grad()
    patch = maker.make(weights())  # the change since the last version, in checkpoint coordinates
    llm.collective_rpc("start_weight_update", args=(False,))  # older workers take is_checkpoint_format
    llm.collective_rpc("update_weights", args=({"patch": patch},))
    llm.collective_rpc("finish_weight_update")
