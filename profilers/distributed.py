"""The rank side of a multi-process run under torchrun: join the process group, agree, hand records on.

torchrun starts one runner child per rank with RANK, LOCAL_RANK, WORLD_SIZE, GROUP_RANK and
MASTER_ADDR/PORT in its environment. Each rank joins the default process group (NCCL on a GPU,
Gloo on the CPU) that DistributedDataParallel reduces gradients over, and a second Gloo group
that only tbd uses to agree on the loop's decisions (warm-up over, window sizes, time budget
spent). The agreement makes every rank run the same iterations in every stage: a rank that left a
stage early would leave the others waiting in DDP's all-reduce until the collective timed out.

The decisions are all MAX reductions of a few floats over the Gloo group: a CPU tensor on any
device, never in a CUDA stream, so they do not show up among the kernels.

On several machines the rank directories live on each machine's own disk; `send_records_to_rank0`
gathers every rank's raw files to rank 0 over the Gloo group, so node 0's parent can assemble the
cluster profile from one folder.
"""

from __future__ import annotations

import datetime
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from tbd.core import rundir

#: Test seam for the failure paths (tests/e2e/test_distributed.py): "RANK:ITERATION:exit=CODE" makes
#: that rank exit with CODE at that iteration, "RANK:ITERATION:hang" makes it stop responding.
FAULT_VARIABLE = "TBD_TEST_RANK_FAULT"


@dataclass(frozen=True)
class RankPlace:
    """Where this process sits in the run, from the variables torchrun sets."""

    rank: int
    local_rank: int
    world_size: int
    local_world_size: int
    node_rank: int

    @property
    def several_machines(self) -> bool:
        return self.local_world_size < self.world_size


def place_from_env(env: dict[str, str] | None = None) -> RankPlace | None:
    """This process's place under torchrun, or None when it is not one of several ranks."""
    env = os.environ if env is None else env
    try:
        world = int(env.get("WORLD_SIZE", "1"))
        if world <= 1 or "RANK" not in env:
            return None
        return RankPlace(rank=int(env["RANK"]), local_rank=int(env.get("LOCAL_RANK", "0")), world_size=world,
                         local_world_size=int(env.get("LOCAL_WORLD_SIZE", str(world))),
                         node_rank=int(env.get("GROUP_RANK", "0")))
    except ValueError:
        return None


#: RUN_DIR/ranks: the ranks' folders of a multi-process run.
RANKS = "ranks"


def rank_dir(run_dir: Path, rank: int) -> Path:
    """RUN_DIR/ranks/rank-K: one rank's raw records, laid out like a single-process run directory."""
    return run_dir / RANKS / f"rank-{rank}"


class RankGroup:
    """The joined process groups of one rank: DDP's, and the Gloo group tbd agrees over."""

    def __init__(self, torch: Any, place: RankPlace, backend: str, timeout_s: float):
        self.torch, self.place, self.backend = torch, place, backend
        dist = torch.distributed
        timeout = datetime.timedelta(seconds=timeout_s)
        dist.init_process_group(backend=backend, timeout=timeout)
        self.control = dist.new_group(backend="gloo", timeout=timeout) if backend != "gloo" else None

    def agree_max(self, values: list[float]) -> list[float]:
        """Each value's maximum over every rank (a collective: every rank must call it in step)."""
        t = self.torch.tensor([float(v) for v in values], dtype=self.torch.float64)
        self.torch.distributed.all_reduce(t, op=self.torch.distributed.ReduceOp.MAX, group=self.control)
        return [float(v) for v in t.tolist()]

    def data_parallel(self, kind: str, options: dict[str, Any]) -> Callable[[Any], Any]:
        """The `parallel` a suite model's build() takes: "ddp" wraps the module in
        DistributedDataParallel; "fsdp" shards it in place with FSDP2's fully_shard."""
        return data_parallel(self.torch, kind, options)

    def send_records_to_rank0(self, own_dir: Path, run_dir: Path) -> None:
        """Every rank's raw files to rank 0's RUN_DIR/ranks/rank-K (the machines share no disk)."""
        files = {str(p.relative_to(own_dir)): p.read_bytes() for p in sorted(own_dir.rglob("*"))
                 if p.is_file() and not p.name.startswith(".")}
        gathered: list[Any] = [None] * self.place.world_size if self.place.rank == 0 else []
        self.torch.distributed.gather_object((self.place.rank, files), gathered if self.place.rank == 0 else None,
                                             dst=0, group=self.control)
        # A sender's gather returns once its bytes are sent, not received: without this barrier it
        # could leave the group and close its connection while rank 0 is still reading (seen in CI
        # as "Connection closed by peer" on rank 0).
        self.torch.distributed.barrier(group=self.control)
        if self.place.rank != 0:
            return
        for rank, rank_files in gathered:
            target = rank_dir(run_dir, rank)
            for name, data in rank_files.items():
                path = target / name
                if not path.exists():  # ranks of this machine wrote theirs here already
                    path.parent.mkdir(parents=True, exist_ok=True)
                    rundir.atomic_write_bytes(path, data)

    def close(self) -> None:
        self.torch.distributed.destroy_process_group()


#: The data-parallel engines `--data-parallel` chooses from, and what each does to a module.
DATA_PARALLEL = ("ddp", "fsdp")


def data_parallel(torch: Any, kind: str, options: dict[str, Any]) -> Callable[[Any], Any]:
    """A wrapper for a suite model's build(parallel=...) (the models call it before making their
    optimizer: FSDP replaces the parameters with their shards).

    "ddp": DistributedDataParallel, without device_ids even on a GPU: the module is on its device
    already, and with device_ids DDP would copy every input there, lengths kept on the host on
    purpose included (Seq2Seq's and Deep Speech 2's pack_padded_sequence lengths: a sync per step,
    or a CTC loss across devices).
    "fsdp": fully_shard (FSDP2) on each top-level child that holds parameters (each item of a
    ModuleList: a list has no forward of its own), then on the root: one all-gather per unit in
    forward and in backward, one reduce-scatter of its gradients.
    """
    if kind == "ddp":
        ddp = torch.nn.parallel.DistributedDataParallel
        return lambda module: ddp(module, device_ids=None, **options)
    if kind != "fsdp":
        raise ValueError(f"unknown data-parallel engine {kind!r}")
    from torch.distributed.fsdp import fully_shard  # here: this module is imported by every runner, torch or not

    def units(module: Any) -> Any:
        for child in module.children():
            if not any(True for _ in child.parameters()):
                continue
            if isinstance(child, (torch.nn.ModuleList, torch.nn.ModuleDict)):  # no forward of its own: its items
                yield from (item for item in child.children() if any(True for _ in item.parameters()))
            else:
                yield child

    def shard(module: Any) -> Any:
        # As DDP does when it wraps: every rank starts from rank 0's weights and buffers (fully_shard
        # keeps each rank's own slice of whatever that rank initialised).
        with torch.no_grad():
            for tensor in [*module.parameters(), *module.buffers()]:
                torch.distributed.broadcast(tensor, src=0)
        for unit in list(units(module)):
            fully_shard(unit, **options)
        fully_shard(module, **options)
        return module
    return shard


def with_fault(step: Callable[[], Any], rank: int, env: dict[str, str] | None = None) -> Callable[[], Any]:
    """`step`, or (under FAULT_VARIABLE naming this rank) a step that exits or hangs at an iteration."""
    spec = (os.environ if env is None else env).get(FAULT_VARIABLE, "")
    parts = spec.split(":")
    if len(parts) != 3 or not parts[0].isdigit() or int(parts[0]) != rank or not parts[1].isdigit():
        return step
    at, action = int(parts[1]), parts[2]
    count = [0]

    def faulty() -> Any:
        count[0] += 1
        if count[0] == at:
            if action.startswith("exit="):
                os._exit(int(action[5:]))
            if action == "hang":
                import time
                while True:
                    time.sleep(3600)
        return step()
    return faulty
