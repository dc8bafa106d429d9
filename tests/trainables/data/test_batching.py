import torch

from trainables.data.batching import collate, eval_batches, train_batches
from trainables.data.encoding import IGNORE_INDEX, Window


def test_train_batches_cover_every_example_once_and_depend_only_on_seed_and_epoch():
    lengths = [(i * 7) % 23 + 1 for i in range(200)]
    a = train_batches(lengths, 8, seed=1, epoch=0)
    assert sorted(i for b in a for i in b) == list(range(200))
    assert a == train_batches(lengths, 8, seed=1, epoch=0)
    assert a != train_batches(lengths, 8, seed=1, epoch=1)
    assert a != train_batches(lengths, 8, seed=2, epoch=0)


def test_length_grouping_cuts_padding():
    lengths = [(i * 37) % 60 + 2 for i in range(400)]
    grouped = train_batches(lengths, 16, seed=0, epoch=0)
    padded = sum(max(lengths[i] for i in b) * len(b) for b in grouped)
    g = torch.Generator().manual_seed(0)
    order = torch.randperm(400, generator=g).tolist()
    random_batches = [order[i : i + 16] for i in range(0, 400, 16)]
    padded_random = sum(max(lengths[i] for i in b) * len(b) for b in random_batches)
    assert padded < 0.75 * padded_random


def test_eval_batches_respect_the_token_budget():
    lengths = [5, 30, 12, 30, 7, 1]
    batches = eval_batches(lengths, max_tokens=60)
    assert sorted(i for b in batches for i in b) == list(range(6))
    assert all(max(lengths[i] for i in b) * len(b) <= 60 for b in batches)


def test_collate_pads_to_the_longest_in_batch():
    w1 = Window((2, 10, 3), (IGNORE_INDEX, 1, IGNORE_INDEX), (1,), 0, 0)
    w2 = Window((2, 11, 12, 13, 3), (IGNORE_INDEX, 0, 2, IGNORE_INDEX, IGNORE_INDEX), (1, 2), 1, 0)
    batch = collate([w1, w2], pad_id=0)
    assert batch["input_ids"].shape == (2, 5)
    assert batch["input_ids"][0].tolist() == [2, 10, 3, 0, 0]
    assert batch["attention_mask"][0].tolist() == [1, 1, 1, 0, 0]
    assert batch["labels"][0].tolist() == [IGNORE_INDEX, 1, IGNORE_INDEX] + [IGNORE_INDEX] * 2
