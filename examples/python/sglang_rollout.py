"""A trainer updating an SGLang engine through sparsesync's custom weight loader (no fork).

Needs sglang, transformers and this package. The engine must list the loader in --custom-weight-loader
(here: the Engine's custom_weight_loader argument). docs/INTEGRATIONS.md has the details.

    python examples/python/sglang_rollout.py Qwen/Qwen2.5-0.5B-Instruct
"""

import sys

import sglang
import torch
from transformers import AutoModelForCausalLM

from sparsesync.integrations import sglang as sg
from sparsesync.integrations.worker import PatchMaker

model_name = sys.argv[1] if len(sys.argv) > 1 else "Qwen/Qwen2.5-0.5B-Instruct"
policy = AutoModelForCausalLM.from_pretrained(model_name, torch_dtype=torch.bfloat16)
weights = lambda: {n: p.detach() for n, p in policy.named_parameters()}  # a tied lm_head once

engine = sglang.Engine(model_path=model_name, custom_weight_loader=[sg.LOAD_FORMAT])
maker = PatchMaker(PatchMaker.layout_entries(weights()), base=weights(), values="ulp")

opt = torch.optim.AdamW(policy.parameters(), lr=1e-6)
for step in range(3):
    print(step, engine.generate("The capital of France is", {"max_new_tokens": 8, "temperature": 0})["text"])
    loss = policy(input_ids=torch.tensor([[1, 2, 3, 4]]), labels=torch.tensor([[1, 2, 3, 4]])).loss
    loss.backward()
    opt.step()
    opt.zero_grad()
    engine.update_weights_from_tensor(named_tensors=sg.named_tensors(maker.make(weights())), load_format=sg.LOAD_FORMAT)
