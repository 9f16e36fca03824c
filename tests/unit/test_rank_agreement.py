"""Several ranks take every stage-ending decision together (LoopCallbacks.agree: each value's maximum).

The other rank is scripted: what it would contribute to each all-reduce. One rank alone deciding
would leave the others waiting in DDP's all-reduce, so every rank must run the same iterations.
"""

from dataclasses import replace

from tbd.core.records import RunSpec
from tbd.profilers.distributed import place_from_env, with_fault
from tbd.profilers.loop import LoopCallbacks, LoopState, run_timing_window, run_warmup
from tbd.profilers.stages import window_plan


class Clock:
    def __init__(self, step_ns):
        self.now, self.step_ns = 0, step_ns

    def clock(self):
        return self.now

    def step(self):
        self.now += self.step_ns


class OtherRank:
    """The other rank's side of each all-reduce, scripted by the call number; records what was asked."""

    def __init__(self, script):
        self.script, self.calls = script, []

    def __call__(self, values):
        mine = list(values)
        theirs = self.script(len(self.calls), mine)
        self.calls.append(mine)
        return [max(a, b) for a, b in zip(mine, theirs)]


def test_warmup_ends_when_the_slowest_rank_is_stable_and_where_it_became_stable():
    # This rank is steady from the start; the other one only says "stable from 25" at its 40th iteration.
    other = OtherRank(lambda i, mine: [0.0, 0.0, 25.0] if i >= 39 else [1.0, 0.0, 0.0])
    c = Clock(1_000_000)
    callbacks = LoopCallbacks(step=c.step, clock=c.clock, agree=other)
    state = LoopState()
    run_warmup(callbacks, RunSpec(model="m", max_warmup_iterations=200), state, deadline_ns=10**15)
    assert state.stable is True
    assert state.warmup_run == 40 and len(state.times_ns) == 40  # one all-reduce per warm-up iteration
    assert state.warmup == 25  # the later start of the two
    assert len(other.calls) == 40
    assert other.calls[-1][0] == 0.0  # this rank had been stable for a while (it said so every time)


def test_one_rank_out_of_budget_ends_every_rank_s_warmup():
    other = OtherRank(lambda i, mine: [1.0, 1.0 if i == 6 else 0.0, 0.0])  # never stable; out of budget at 7
    c = Clock(1_000_000)
    state = LoopState()
    run_warmup(LoopCallbacks(step=c.step, clock=c.clock, agree=other), RunSpec(model="m"), state, deadline_ns=10**15)
    assert (state.stable, state.warmup, len(state.times_ns)) == (False, 7, 7)


def test_the_windows_are_sized_by_the_slowest_rank():
    state = LoopState(times_ns=[1_000_000_000] * 5, warmup=0)
    spec = RunSpec(model="m", iterations=20, trace_iterations=3, window_seconds=10.0)
    alone = window_plan(spec, state, gemm_s=1.0)
    together = window_plan(spec, state, gemm_s=1.0, agree=OtherRank(lambda i, mine: [2.0, 3.0]))
    assert (alone.timing_iterations, together.timing_iterations) == (10, 5)  # 10 s at 1 s, at the other's 2 s
    assert together.iteration_s == 2.0


def test_the_timing_window_is_not_cut_by_one_rank_s_deadline():
    c = Clock(1_000_000)
    callbacks = LoopCallbacks(step=c.step, clock=c.clock)
    state = LoopState()
    run_timing_window(callbacks, 10, state, deadline_ns=3_000_000)  # alone: cut at the deadline
    assert state.timing_window == (0, 2)
    state = LoopState()
    run_timing_window(replace(callbacks, agree=lambda v: v), 10, state, deadline_ns=3_000_000)
    assert state.timing_window == (0, 9)  # with ranks: the agreed size runs to the end


def test_place_from_torchrun_s_variables():
    env = {"RANK": "3", "LOCAL_RANK": "1", "WORLD_SIZE": "4", "LOCAL_WORLD_SIZE": "2", "GROUP_RANK": "1"}
    place = place_from_env(env)
    assert (place.rank, place.local_rank, place.world_size, place.node_rank) == (3, 1, 4, 1)
    assert place.several_machines
    assert place_from_env({"RANK": "0", "WORLD_SIZE": "1"}) is None  # one process: a plain run
    assert place_from_env({}) is None


def test_the_fault_seam_only_touches_the_named_rank():
    def step():
        return "ran"
    assert with_fault(step, 0, {"TBD_TEST_RANK_FAULT": "1:3:exit=7"}) is step
    assert with_fault(step, 1, {}) is step
    assert with_fault(step, 1, {"TBD_TEST_RANK_FAULT": "garbage"}) is step
