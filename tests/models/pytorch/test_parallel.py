"""Data-parallel training: each suite model's build(parallel=...) runs its steps through DistributedDataParallel.

Two processes (gloo, CPU) train the same model on different data. After the steps every
parameter must be identical on both ranks (the gradients were averaged) and differ from a
single-process run on rank 0's data alone (rank 1's data took part). DDP broadcasts rank 0's
weights when it wraps the model, so giving the ranks different seeds (which fix weights and data
alike) only makes their data differ.
"""

from __future__ import annotations

import importlib
import queue
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel

from tbd.core.errors import UsageError
from tbd.models.pytorch import a3c, resnet50
from tbd.profilers.distributed import data_parallel

SEEDS = (0, 1)  # rank 0, rank 1
STEPS = 2
# model: batch at test size (Inception's aux head needs 2, Faster R-CNN fixes 1)
BATCH = {"resnet50": 2, "inception3": 2, "seq2seq": 2, "transformer": 2, "deepspeech2": 2, "faster_rcnn": 1,
         "wgan": 2}
JOIN_S = 120  # a rank stuck in a collective fails the test instead of hanging it


@pytest.fixture(autouse=True)
def _one_intra_op_thread():
    """One intra-op thread in this process too (as the ranks), restored afterwards."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _train(name: str, seed: int, parallel=None) -> dict[str, torch.Tensor]:
    """Build `name` at test size, run STEPS steps, return its parameters by name."""
    torch.manual_seed(0)  # dropout masks: the same on both ranks and in the single-process run
    module = importlib.import_module(f"tbd.models.pytorch.{name}")
    work = module.build(BATCH[name], "cpu", "test", seed=seed, pool_size=1, parallel=parallel)
    for _ in range(STEPS):
        work.step()
    # FSDP's parameters are shards (DTensors): gathered whole, every rank in the same order.
    return {key: (value.full_tensor() if hasattr(value, "full_tensor") else value).detach().clone()
            for key, value in work.model.named_parameters()}


def _rank(rank: int, name: str, seeds: tuple[int, ...], folder: Path, results: mp.Queue, engine: str) -> None:
    """One rank: train `name` data-parallel, save its parameters to folder/rank<r>.pt, report (rank, error).

    `engine` "ddp" wraps in DistributedDataParallel directly; "tbd-ddp" and "tbd-fsdp" through the
    wrapper the runner passes (profilers/distributed.data_parallel)."""
    torch.set_num_threads(1)  # two ranks on a 2-core machine
    dist.init_process_group("gloo", init_method=f"file://{folder / 'store'}", rank=rank, world_size=len(seeds))
    try:
        module = importlib.import_module(f"tbd.models.pytorch.{name}")
        if engine == "ddp":
            options = getattr(module, "DDP_OPTIONS", {})
            wrap = lambda m: DistributedDataParallel(m, **options)  # noqa: E731
        else:
            wrap = data_parallel(torch, engine.removeprefix("tbd-"), {})
        params = _train(name, seeds[rank], parallel=wrap)
        torch.save(params, folder / f"rank{rank}.pt")
        results.put((rank, None))
    except BaseException as exc:
        results.put((rank, repr(exc)))
        raise
    finally:
        dist.destroy_process_group()


def _ddp_params(name: str, tmp_path: Path, seeds: tuple[int, ...] = SEEDS,
                engine: str = "ddp") -> list[dict[str, torch.Tensor]]:
    """Each rank's parameters after STEPS data-parallel steps of `name`, rank r built with seeds[r]."""
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    procs = [ctx.Process(target=_rank, args=(rank, name, seeds, tmp_path, results, engine))
             for rank in range(len(seeds))]
    for proc in procs:
        proc.start()
    try:
        for _ in procs:  # a failed rank can leave the other waiting in a collective: stop at the first error
            rank, error = results.get(timeout=JOIN_S)
            assert error is None, f"{name}: rank {rank} failed: {error}"
    except queue.Empty:
        pytest.fail(f"{name}: a rank sent no result within {JOIN_S} s")
    finally:
        for proc in procs:
            proc.join(timeout=10)
            if proc.is_alive():
                proc.kill()
                proc.join()
    return [torch.load(tmp_path / f"rank{rank}.pt") for rank in range(len(seeds))]


@pytest.mark.parametrize("name", list(BATCH))
def test_ddp_averages_gradients_across_ranks(name, tmp_path):
    rank0, rank1 = _ddp_params(name, tmp_path)
    alone = _train(name, SEEDS[0])
    assert rank0.keys() == rank1.keys() == alone.keys()
    for key in rank0:
        assert torch.equal(rank0[key], rank1[key]), f"{name}: {key} differs between the ranks"
    changed = [key for key in rank0 if not torch.allclose(rank0[key], alone[key])]
    assert changed, f"{name}: the data-parallel run matches the single-process one: rank 1's data had no effect"


def test_parallel_none_is_the_single_process_workload():
    losses = []
    for kwargs in ({}, {"parallel": None}):
        torch.manual_seed(0)
        work = resnet50.build(2, "cpu", "test", seed=0, pool_size=2, **kwargs)
        losses.append([work.step().item() for _ in range(3)])
    assert losses[0] == losses[1]


def test_a3c_refuses_data_parallel():
    with pytest.raises(UsageError, match="asynchronous worker processes") as err:
        a3c.build(5, "cpu", "test", workers=1, parallel=lambda m: m)
    assert "--nproc-per-node" in err.value.hint


def test_wgan_gradient_penalty_is_all_reduced(tmp_path):
    """Both ranks on rank 0's data: the averaged gradient is the single process's, so are the weights.

    WGAN-GP's critic loss differentiates through a gradient (double backward through the
    critic's DDP wrapper); this checks that the all-reduced gradient carries the penalty's part.
    (Measured: the weights match the single process's bit for bit.)
    """
    rank0, rank1 = _ddp_params("wgan", tmp_path, seeds=(SEEDS[0], SEEDS[0]))
    alone = _train("wgan", SEEDS[0])
    for key in alone:
        assert torch.equal(rank0[key], rank1[key]), f"wgan: {key} differs between the ranks"
        torch.testing.assert_close(rank0[key], alone[key], msg=f"wgan: {key} differs from one process")


FSDP_MODELS = [name for name in BATCH
               if "fsdp" in getattr(importlib.import_module(f"tbd.models.pytorch.{name}"), "DATA_PARALLEL", ())]


def test_the_models_that_say_fsdp_are_those_it_was_checked_on():
    """transformer (tied embedding and output weights across shard units) and wgan (its networks
    also run unwrapped) fail under fully_shard; the others say so by DATA_PARALLEL."""
    assert FSDP_MODELS == ["resnet50", "inception3", "seq2seq", "deepspeech2", "faster_rcnn"]


@pytest.mark.parametrize("name", FSDP_MODELS)
def test_fsdp_trains_as_ddp_does(name, tmp_path):
    """Sharded (FSDP2, reduce-scatter of gradients) or replicated (DDP, all-reduce), two ranks on
    different data end with the same weights: both average the gradients before the same update."""
    (tmp_path / "ddp").mkdir()
    (tmp_path / "fsdp").mkdir()
    ddp = _ddp_params(name, tmp_path / "ddp", engine="tbd-ddp")
    fsdp = _ddp_params(name, tmp_path / "fsdp", engine="tbd-fsdp")
    for key in ddp[0]:
        torch.testing.assert_close(fsdp[0][key], ddp[0][key], rtol=1e-4, atol=1e-6, msg=f"{name}: {key}")
        assert torch.equal(fsdp[0][key], fsdp[1][key]), f"{name}: {key} differs between the FSDP ranks"
