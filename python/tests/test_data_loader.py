"""d5.data_loader: the batches are the dataset's samples at the sampler's indices, in the same order
whatever the loader prefetches and however many workers make them; epochs, restoring a position,
training through a loader equal to training through the sampler, and the errors."""
import numpy as np
import pytest

import deep500 as d5


def losses(result):
    (loss,) = [m for m in result["metrics"] if m["name"] == "loss"]
    return loss["samples"]


def test_batches_are_the_datasets_samples_in_one_order_whatever_the_prefetch():
    data = d5.dataset("synthetic-learnable", samples=64, seed=3)
    orders = {}
    for prefetch, workers in [(0, 1), (2, 1), (4, 3)]:
        loader = d5.data_loader(data, d5.sampler("shuffle", data, 16, seed=5), prefetch=prefetch, workers=workers)
        assert (loader.batches_per_epoch, loader.batch_size, loader.prefetch, loader.workers) == (4, 16, prefetch, workers)
        seen = []
        for epoch in range(2):
            for batch in loader:
                indices = list(loader.last_indices)
                want = data.fetch(indices)  # the oracle: the dataset itself at those indices
                assert set(batch) == set(want)
                for name in want:
                    np.testing.assert_array_equal(np.asarray(batch[name]), np.asarray(want[name]), err_msg=name)
                seen.append(indices)
            assert loader.epoch == epoch
        orders[(prefetch, workers)] = seen
        timings = loader.timings
        assert len(timings) == 8
        for t in timings:
            assert t["wait_s"] >= 0 and t["fetch_s"] > 0
            assert t["produce_s"] == pytest.approx(t["fetch_s"] + t["transform_s"] + t["copy_s"])
    first = orders[(0, 1)]
    assert all(order == first for order in orders.values())
    # Each epoch holds every sample once; a shuffling sampler orders the second epoch anew.
    assert sorted(i for b in first[:4] for i in b) == list(range(64)) == sorted(i for b in first[4:] for i in b)
    assert first[:4] != first[4:]


def test_a_loader_restored_to_a_position_continues_from_it():
    data = d5.dataset("synthetic-learnable", samples=64, seed=3)
    loader = d5.data_loader(data, batch=16, seed=5)
    it = iter(loader)
    next(it)
    next(it)
    assert loader.state == (0, 2)
    rest = [list(loader.last_indices) for _ in loader]
    assert len(rest) == 2
    other = d5.data_loader(data, batch=16, seed=5, prefetch=0)
    other.restore((0, 2))
    assert [list(other.last_indices) for _ in other] == rest
    # A loop broken off continues where it stopped; start_next_epoch drops the rest.
    third = d5.data_loader(data, batch=16, seed=5)
    for _ in third:
        break
    assert sum(1 for _ in third) == 3
    third.start_next_epoch()
    assert third.epoch == 1 and sum(1 for _ in third) == 4


def test_training_through_a_loader_equals_training_through_its_sampler():
    train = d5.dataset("synthetic-learnable", samples=256, seed=1)

    def run(**batches):
        net = d5.models.create("lenet5", batch=32, with_loss=True, seed=7)
        return d5.Trainer(d5.optimizer("sgd", d5.executor(net), lr=0.05), **batches).train(epochs=2)

    direct = run(dataset=train, sampler=d5.sampler("shuffle", train, 32, seed=9))
    loaded = run(loader=d5.data_loader(train, d5.sampler("shuffle", train, 32, seed=9), prefetch=3, workers=2))
    assert len(losses(direct)) == 16
    assert losses(loaded) == losses(direct)  # the same batches in the same order: the same steps, bit for bit
    other = run(dataset=train, sampler=d5.sampler("shuffle", train, 32, seed=10))
    assert losses(other) != losses(direct)  # the comparison can tell orders apart


def test_loader_errors_say_what_to_fix():
    data = d5.dataset("synthetic-learnable", samples=64, seed=3)
    with pytest.raises(d5.InvalidArgument, match="prefetch must be >= 0"):
        d5.data_loader(data, batch=16, prefetch=-1)
    with pytest.raises(d5.InvalidArgument, match="workers must be in"):
        d5.data_loader(data, batch=16, workers=0)
    with pytest.raises(d5.InvalidArgument, match="a sampler, or the batch size"):
        d5.data_loader(data)
    other = d5.dataset("synthetic-learnable", samples=64, seed=4)
    with pytest.raises(d5.InvalidArgument, match="another dataset"):
        d5.data_loader(data, d5.sampler("shuffle", other, 16))
    net = d5.models.create("lenet5", batch=16, with_loss=True)
    opt = d5.optimizer("sgd", d5.executor(net))
    loader = d5.data_loader(data, batch=16)
    with pytest.raises(d5.InvalidArgument, match="brings its own sampler"):
        d5.Trainer(opt, loader=loader, batch=16)
    with pytest.raises(d5.InvalidArgument, match="another dataset"):
        d5.Trainer(opt, other, loader=loader).train(max_steps=1)
