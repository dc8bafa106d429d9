"""The allocator set-up of a training process: the 47 MiB embedding gradient that MiniLM's
backward makes and frees each step must be reused by the next step, not faulted in again
page by page."""

from __future__ import annotations

import platform
import subprocess
import sys

import pytest

# Each child trains an embedding the size of MiniLM's (30522 x 384) under a linear layer, as a
# tagger's loop does (backward, fused AdamW, grads set to None), and prints the minor page
# faults of ten steps after two warm-up steps.
CHILD = """
import resource, sys, torch
from trainables.model.memory import keep_freed_memory
kept = keep_freed_memory() if sys.argv[1] == "keep" else None
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Embedding(30522, 384), torch.nn.Linear(384, 384))
optimizer = torch.optim.AdamW(model.parameters(), fused=True)
ids = torch.randint(0, 30522, (16, 40))
def step():
    model(ids).square().mean().backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
step(); step()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(10):
    step()
print(kept, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""
PAGES_PER_BUFFER = 30522 * 384 * 4 // 4096


def _faults(mode: str) -> tuple[str, int]:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, mode], capture_output=True, text=True, check=True
    )
    kept, faults = out.stdout.split()
    return kept, int(faults)


@pytest.mark.skipif(
    platform.system() != "Linux" or platform.libc_ver()[0] != "glibc",
    reason="the switch exists only for glibc's allocator",
)
@pytest.mark.slow  # over ~7 s: the slow tier
def test_the_embedding_gradient_is_reused_from_step_to_step():
    kept, kept_faults = _faults("keep")
    _, default_faults = _faults("default")
    assert kept == "True"
    # glibc's default maps the embedding gradient anew each step: every page faults each time
    assert default_faults > 5 * PAGES_PER_BUFFER, (default_faults, kept_faults)
    # kept: now and then a fresh buffer (glibc's bins are not exact), mostly reuse
    assert kept_faults < 3 * PAGES_PER_BUFFER, (kept_faults, default_faults)


def test_elsewhere_it_says_it_did_nothing(monkeypatch):
    from trainables.model import memory

    monkeypatch.setattr(memory.platform, "system", lambda: "Darwin")
    assert memory.keep_freed_memory() is False
