"""Python stacks start at the user's frame, not in torch (issue 28): profilers.kineto.stacks.user_stack."""

import pytest
from testpaths import real_trace

from tbd.cli.run_analysis import profile_from_trace
from tbd.profilers.kineto.stacks import MAX_FRAMES, SEPARATOR, user_stack

# PyTorch 2.6's frames around a BERT linear layer, innermost first (pt26_h100_bert_inference's shape).
BERT = ["<built-in function linear>", "torch/nn/modules/linear.py(124): forward",
        "torch/nn/modules/module.py(1743): _call_impl", "torch/nn/modules/module.py(1751): _wrapped_call_impl",
        "nn.Module: Linear_24", "transformers/models/bert/modeling_bert.py(762): forward",
        "torch/nn/modules/module.py(1743): _call_impl", "nn.Module: BertOutput_11", "train.py(40): step"]


def test_the_framework_frames_inside_the_op_go_and_the_call_plumbing_everywhere():
    assert user_stack(BERT) == SEPARATOR.join(["transformers/models/bert/modeling_bert.py(762): forward",
                                               "nn.Module: BertOutput_11", "train.py(40): step"])


def test_at_most_max_frames_from_the_users_frame_then_an_ellipsis():
    frames = ["torch/_ops.py(1244): __call__"] + [f"model.py({i}): f{i}" for i in range(MAX_FRAMES + 2)]
    out = user_stack(frames).split(SEPARATOR)
    assert out[0] == "model.py(0): f0" and len(out) == MAX_FRAMES + 1 and out[-1] == "…"


def test_a_stack_of_framework_frames_only_is_kept():
    frames = ["<built-in method conv2d of type object at 0x1>", "torch/nn/modules/conv.py(443): forward"]
    assert user_stack(frames) == SEPARATOR.join(frames)


@pytest.mark.parametrize("trace", ["pt19_resnet50_v100", "pt26_h100_bert_inference"])
def test_no_stack_of_a_real_trace_starts_in_torch(trace):
    path = real_trace(f"gpu/{trace}.json.gz")
    if not path.exists():
        pytest.skip("real GPU traces not fetched (tests/fixtures/README.md)")
    stacks = [o["stack"] for r in profile_from_trace(path).kernels for o in r.ops if o.get("stack")]
    assert stacks
    for stack in stacks:
        first = stack.split(SEPARATOR)[0]
        assert not first.startswith(("torch/", "<built-in", "nn.Module: ")), stack
        assert "_call_impl" not in stack
