"""What the trainer relies on in torch beyond its public API, checked against the installed
torch: each assumption listed in trainables/training/torch_internals.py has a test here, so
an upgrade that breaks one fails by name instead of clipping gradients differently."""

from __future__ import annotations

import inspect

import torch
from torch.nn.utils import clip_grad

from trainables.training import torch_internals


def _tensors() -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    return [torch.randn(shape, generator=generator) for shape in ((3, 4), (5,), (2, 2, 2))]


def test_foreach_norm_is_each_tensors_vector_norm():
    tensors = _tensors()
    norms = torch_internals.foreach_norm(tensors, 2.0)
    assert len(norms) == len(tensors)
    for norm, tensor in zip(norms, tensors, strict=True):
        assert torch.equal(norm, torch.linalg.vector_norm(tensor, 2.0))


def test_foreach_mul_multiplies_each_tensor_in_place():
    tensors, factor = _tensors(), torch.tensor(0.25)
    expected = [t * factor for t in tensors]
    torch_internals.foreach_mul_(tensors, factor)
    for got, want in zip(tensors, expected, strict=True):
        assert torch.equal(got, want)


def test_torchs_own_foreach_clipping_runs_the_same_two_functions():
    """Clipping through them matches `clip_grad_norm_(foreach=True)` bit for bit only while
    torch's clipping is made of them."""
    source = inspect.getsource(clip_grad)
    assert "torch._foreach_norm(" in source, "clip_grad_norm_ no longer norms with _foreach_norm"
    assert "torch._foreach_mul_(" in source, "clip_grad_norm_ no longer scales with _foreach_mul_"
    grads, own = _tensors(), _tensors()
    params = [torch.nn.Parameter(torch.zeros_like(g)) for g in grads]
    for p, g in zip(params, grads, strict=True):
        p.grad = g
    torch.nn.utils.clip_grad_norm_(params, 1.0, foreach=True)
    norm = torch.linalg.vector_norm(torch.stack(torch_internals.foreach_norm(own, 2.0)), 2.0)
    torch_internals.foreach_mul_(own, torch.clamp(1.0 / (norm + 1e-6), max=1.0))
    for p, g in zip(params, own, strict=True):
        assert torch.equal(p.grad, g)
