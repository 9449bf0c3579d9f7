"""An RL loop end to end: a small Hugging Face causal LM trained with policy-gradient steps on GPU 0, and a
rollout worker on GPU 1 holding its own BF16 copy, updated through sparsesync after every step. After every
step the worker's weights must equal the trainer's BF16 cast bit for bit, and its logits on fixed prompts must
equal those of a reference model loaded densely with that cast (on the same GPU, so the same kernels run).

Needs two GPUs, torch and transformers (skips otherwise). SPARSESYNC_RL_STEPS sets the number of steps."""

import hashlib
import os
import threading

import pytest

import sparsesync as ss
from sparsesync import _core

torch = pytest.importorskip("torch", reason="needs torch")
transformers = pytest.importorskip("transformers", reason="needs transformers")

pytestmark = pytest.mark.skipif(not (ss.HAS_CUDA and _core.has_tcp and torch.cuda.is_available() and torch.cuda.device_count() >= 2),
                                reason="needs a build with GPU endpoints and two visible GPUs")

STEPS = int(os.environ.get("SPARSESYNC_RL_STEPS", "12"))


def _config():
    return transformers.GPT2Config(vocab_size=2048, n_positions=64, n_embd=256, n_layer=4, n_head=4, tie_word_embeddings=True)


def _bf16_state(model):
    """The trainer's weights as the workers get them: every parameter cast to BF16 (tied ones once)."""
    return {n: p.detach().to(torch.bfloat16).contiguous() for n, p in model.named_parameters()}


def _digest(tensors):
    h = hashlib.sha256()
    for t in tensors:
        h.update(t.contiguous().view(torch.uint8).cpu().numpy().tobytes())
    return h.hexdigest()


@pytest.mark.parametrize("link", ["tcp", "nccl"])
def test_policy_gradient_loop_trainer_gpu0_worker_gpu1(tmp_path, capsys, link):
    if link == "nccl" and not ss.HAS_NCCL:
        pytest.skip("built without NCCL endpoints")
    torch.manual_seed(0)
    trainer = transformers.GPT2LMHeadModel(_config()).to("cuda:0")
    optim = torch.optim.AdamW(trainer.parameters(), lr=1e-5)  # an RL learning rate: most BF16 casts do not move
    state = _bf16_state(trainer)
    layout = ss.Layout([(n, t) for n, t in state.items()])

    worker = transformers.GPT2LMHeadModel(_config()).to(device="cuda:1", dtype=torch.bfloat16).eval()
    reference = transformers.GPT2LMHeadModel(_config()).to(device="cuda:1", dtype=torch.bfloat16).eval()
    worker_params = dict(worker.named_parameters())
    worker_tensors = {n: worker_params[n].data for n in state}  # the worker's live parameters, written in place
    prompts = torch.randint(0, 2048, (4, 16), generator=torch.Generator().manual_seed(1)).to("cuda:1")

    key = tmp_path / "sync.key"
    ss.generate_key_file(key)
    results, failures = [], []
    lines = []
    with ss.Publisher(layout, key, device="cuda:0", transport=link) as pub:

        def rollout_worker():
            try:
                with ss.Subscriber(layout, worker_tensors, key, port=pub.port, transport=link) as sub, torch.no_grad():
                    for report in sub:
                        logits = worker(prompts).logits
                        results.append((report, _digest(worker_tensors[n] for n in state), logits))
            except Exception as e:
                failures.append(e)

        thread = threading.Thread(target=rollout_worker)
        thread.start()
        pub.accept(timeout=60)
        assert pub.wait_for_receivers(1, timeout=60)
        for step in range(STEPS + 1):
            if step:
                # REINFORCE on sampled continuations; the reward: how many sampled tokens are even ids.
                with torch.no_grad():
                    start = torch.randint(0, 2048, (8, 4), device="cuda:0")
                    seq = trainer.generate(start, do_sample=True, max_new_tokens=12, pad_token_id=0)
                logp = torch.log_softmax(trainer(seq).logits[:, :-1].float(), -1).gather(-1, seq[:, 1:, None])[..., 0]
                reward = (seq[:, 4:] % 2 == 0).float().mean(-1)
                loss = -((reward - reward.mean())[:, None] * logp[:, 3:]).mean()
                optim.zero_grad()
                loss.backward()
                optim.step()
            state = _bf16_state(trainer)
            published = pub.publish(step + 1, state)
            assert published["acknowledged"] == 1, published
            while len(results) < step + 1 and not failures and thread.is_alive():
                thread.join(0.01)
            assert not failures, failures
            report, worker_digest, logits = results[step]
            assert report["version"] == step + 1
            assert worker_digest == _digest(state.values()), f"step {step}: the worker's weights differ from the trainer's BF16 cast"
            with torch.no_grad():
                reference.load_state_dict({n: t.to("cuda:1") for n, t in state.items()}, strict=False)
                expected = reference(prompts).logits
            assert torch.equal(logits, expected), f"step {step}: logits differ"
            lines.append(f"step {step:3d}: version {report['version']} {'full' if report['full'] else 'patch'}, "
                         f"{published['changed']} of {published['numel']} changed, {published['payload_bytes']} B, "
                         f"{published['bits_per_changed'] or 0:.2f} bits/change, publish {published['ms']:.1f} ms, "
                         f"worker weights sha256 {worker_digest[:16]} == trainer, logits bit-identical")
        pub.close()
        thread.join(60)
    assert not failures, failures
    assert any(0 < r[0]["changed"] for r in results[1:]), "no step changed the BF16 weights: the test proves nothing"
    with capsys.disabled():
        print(f"\nlink {link}:\n" + "\n".join(lines))
