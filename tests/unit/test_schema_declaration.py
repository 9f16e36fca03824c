"""The result schemas are declared once: each field's annotation is its rule on loading.

tbd/core/field_checks.py reads the dataclasses of tbd/core/profile_result.py (profile_cluster.py,
sweep_result.py, comparison.py); nothing else lists their fields. So a numeric field without a
range cannot be declared, changing an annotation changes what loads, and every declared field of a
real profile.json is checked. Also: `assemble_profile` takes one `ProfileInputs` record.
"""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass, field
from typing import Annotated, Any

import pytest
from testpaths import FIXTURES

from tbd.analysis.assemble import NO_CUDA, NO_SAMPLES, NullReasons, ProfileInputs, assemble_profile
from tbd.analysis.memory.pytorch import memory_breakdown
from tbd.analysis.peaks import PeakFlops, PeakModel
from tbd.cli.run_analysis import profile_from_trace
from tbd.core import field_checks as c
from tbd.core import raw_records
from tbd.core.comparison import Comparison
from tbd.core.errors import ResultFormatError
from tbd.core.field_checks import REQUIRED, Keys, Pct, Range
from tbd.core.profile_result import KernelRow, Profile, Value
from tbd.core.sweep_result import Sweep
from tbd.core.tta_result import TtaResult


def _numbers(annotation: Any, where: str, seen: set) -> list[tuple[str, Range | None]]:
    """(path, its Range or None) of every int or float the annotation holds, records walked."""
    base, metadata, _ = c.peel(annotation)
    rule = next((m for m in metadata if isinstance(m, Range)), None)
    keys = next((m for m in metadata if isinstance(m, Keys)), None)
    if base in (int, float):
        return [(where, rule)]
    if base == (str, int):  # a label ("cpu" or a device index), not a figure
        return []
    out = []
    if keys is not None:
        out += _numbers(keys.of, where, seen)
    for arg in typing.get_args(base):
        out += _numbers(arg, where + "[]", seen)
    if (dataclasses.is_dataclass(base) or typing.is_typeddict(base)) and base not in seen:
        seen.add(base)
        for name, hint in typing.get_type_hints(base, include_extras=True).items():
            out += _numbers(hint, f"{base.__name__}.{name}", seen)
    return out


@pytest.mark.parametrize("document", [Profile, Sweep, Comparison, TtaResult])
def test_every_number_of_a_result_schema_declares_its_range(document):
    numbers = _numbers(document, document.__name__, set())
    assert len(numbers) >= (80 if document is Profile else 10)  # the walk reached the records
    bare = [where for where, rule in numbers if rule is None]
    assert not bare, f"declare a Range (field_checks.Pct, Amount, Count, ...) for: {bare}"


def test_a_number_without_a_range_cannot_be_declared():
    @dataclass(frozen=True)
    class Row:
        name: str
        share: float | None

    load = c.loader(Row)  # compiled on the first load (not at import: start-up time)
    with pytest.raises(TypeError, match=r"Row\.share: a number needs its Range"):
        load({"name": "x", "share": 1.0})


def _variant(record: type, name: str, annotation: Any, **default: Any) -> type:
    """`record` with field `name` declared as `annotation` (and a default, if given)."""
    fields = [(f.name, annotation if f.name == name else f.type,
               field(**default) if f.name == name and default else
               field(default=f.default) if f.default is not dataclasses.MISSING else
               field(default_factory=f.default_factory) if f.default_factory is not dataclasses.MISSING else
               field()) for f in dataclasses.fields(record)]
    made = dataclasses.make_dataclass(record.__name__, fields, frozen=True)
    made.__module__ = record.__module__  # the aliases (Pct, Count) resolve where the record lives
    return made


def test_changing_an_annotation_changes_what_loads():
    assert c.loader(Value)({"value": 60.0, "reason": None}) == Value(60.0)
    narrower = _variant(Value, "value", Annotated[float, Range(0.0, 50.0)] | None)
    with pytest.raises(ResultFormatError, match=r"^profile key 'value' is 60, outside \[0, 50\]$"):
        c.loader(narrower)({"value": 60.0, "reason": None})

    with pytest.raises(ResultFormatError, match="profile key 'value' is null"):
        c.loader(_variant(Value, "value", Pct))({"value": None})
    counted = _variant(Value, "value", Annotated[int, Range(0)] | None)
    with pytest.raises(ResultFormatError, match="profile key 'value' has type float, expected an integer"):
        c.loader(counted)({"value": 60.0})


def test_absent_and_null_read_as_the_declaration_says():
    load = c.loader(KernelRow)
    row = {"name": "k", "calls": 1, "time_s": 0.5, "time_share_pct": 10.0, "flops": None, "flop_source": None,
           "precision": "fp32", "util_pct": None}
    loaded = load(row)
    assert loaded.ops == [] and loaded.mean_s is None  # added in schema 2: absent reads as the default
    assert load({**row, "ops": None}).ops == []  # a defaulted list given as null: its default
    assert load({k: v for k, v in row.items() if k != "flops"}).flops is None  # nullable: absent is null
    with pytest.raises(ResultFormatError, match=r"^profile is missing 'calls'$"):
        load({k: v for k, v in row.items() if k != "calls"})
    with pytest.raises(ResultFormatError, match=r"^profile key 'name' is null$"):
        load({**row, "name": None})
    strict = c.loader(_variant(KernelRow, "ops", Annotated[list[dict[str, Any]], REQUIRED], default_factory=list))
    with pytest.raises(ResultFormatError, match=r"^profile is missing 'ops'$"):
        strict(row)


@pytest.fixture(scope="module")
def good() -> dict:
    return profile_from_trace(FIXTURES / "kineto_cuda_synthetic.json", sm_clock_mhz=1410).to_dict()


def _declared_numbers(record: type, data: Any, key: str) -> list[tuple[str, tuple, Any]]:
    """(key, path into `data`, the number's base type) of every declared number `data` holds,
    following the dataclass records (first list item) the way the loader does."""
    out = []
    if not isinstance(data, dict):
        return out
    for name, hint in typing.get_type_hints(record, include_extras=True).items():
        if name not in data or data[name] is None:
            continue
        base, _, _ = c.peel(hint)
        at = f"{key}.{name}" if key else name
        if base in (int, float):
            out.append((at, (name,), base))
        elif dataclasses.is_dataclass(base):
            out += [(k, (name, *p), b) for k, p, b in _declared_numbers(base, data[name], at)]
        elif typing.get_origin(base) is list and data[name]:
            item, _, _ = c.peel(typing.get_args(base)[0])
            if dataclasses.is_dataclass(item):
                out += [(k, (name, 0, *p), b) for k, p, b in _declared_numbers(item, data[name][0], f"{at}[0]")]
            elif item in (int, float):
                out.append((f"{at}[0]", (name, 0), item))
    return out


def test_every_declared_number_of_a_real_profile_is_checked_on_loading(good):
    numbers = _declared_numbers(Profile, good, "")
    assert len(numbers) >= 40 and "kernels[0].calls" in [k for k, _, _ in numbers]
    for key, path, base in numbers:
        data = Profile.from_dict(good).to_dict()  # a fresh copy
        parent = data
        for step in path[:-1]:
            parent = parent[step]
        parent[path[-1]] = "7"
        word = "an integer" if base is int else "a number"
        with pytest.raises(ResultFormatError) as err:
            Profile.from_dict(data)
        assert str(err.value) == f"profile key '{key}' has type str, expected {word}"


# --- the inputs record of assemble_profile ------------------------------------------------------

def _inputs(**changes: Any) -> ProfileInputs:
    return ProfileInputs(spec={"model": "m", "framework": "pytorch", "device": "cpu"}, environment={}, log=None,
                         workload=None, cpu=None, nvml=None, trace=None,
                         memory=memory_breakdown(None, None, None),
                         peaks=PeakModel({"fp32": PeakFlops(None, "not known", "")}), **changes)


def test_the_inputs_record_is_frozen_and_named_field_by_field():
    inputs = _inputs()
    with pytest.raises(dataclasses.FrozenInstanceError):
        inputs.status = "partial"
    with pytest.raises(TypeError):
        ProfileInputs({}, {}, None, None, None, None, None, inputs.memory, inputs.peaks)  # keywords only
    with pytest.raises(TypeError, match="peaks"):
        ProfileInputs(spec={}, environment={}, log=None, workload=None, cpu=None, nvml=None, trace=None,
                      memory=inputs.memory)  # the records have no default: each caller says what it has
    assert inputs.null_reasons == NullReasons() and inputs.notes == [] and inputs.kernel_rows_shown == 200


def test_null_reasons_default_to_a_cpu_run_and_are_named_per_figure():
    metrics = assemble_profile(_inputs()).metrics
    assert metrics.gpu_busy_pct == Value(None, "no trace window was recorded")  # no trace at all
    assert metrics.gpu_busy_nvml_pct == Value(None, NO_CUDA)
    assert metrics.cpu_util_pct == Value(None, "no timing window was completed")
    assert metrics.throughput.value is None and metrics.throughput.reason == NO_SAMPLES

    why = NullReasons(gpu_busy_nvml="NVML off", cpu_util="no counters", throughput="no batch")
    metrics = assemble_profile(_inputs(null_reasons=why, status="partial", notes=["first"])).metrics
    assert (metrics.gpu_busy_nvml_pct.reason, metrics.cpu_util_pct.reason, metrics.throughput.reason) == (
        "NVML off", "no counters", "no batch")


def test_a_profile_assembled_from_inputs_round_trips(good):
    profile = assemble_profile(_inputs(status="partial", notes=["partial: stopped"], provenance={"trace": "t"}))
    assert profile.status == "partial" and profile.notes[0] == "partial: stopped"
    assert profile.provenance == {"trace": "t"}
    assert Profile.from_dict(profile.to_dict()) == profile
    assert Profile.from_dict(good).to_dict() == good


@pytest.mark.parametrize("name", sorted(raw_records.RECORDS))
def test_every_number_of_a_raw_record_declares_its_range(name):
    declared = raw_records.RECORDS[name][0]
    numbers = _numbers(declared, declared.__name__, set())
    bare = [where for where, rule in numbers if rule is None]
    assert not bare, f"declare a Range for: {bare}"


def test_no_number_is_unbounded():
    """An integer without a declared top stops at 2**53 (a 10**400 read back raised OverflowError in the
    renderers that format it, issue 29); a float is any finite one."""
    @dataclass(frozen=True)
    class Row:
        n: c.Count
        x: c.Amount
        d: c.Delta
        free: dict[str, Any]

    load = c.loader(Row)
    assert load({"n": 2**53, "x": 1.7e308, "d": -1.7e308, "free": {"seed": 2**64, "f": [1e300]}}) == \
        Row(2**53, 1.7e308, -1.7e308, {"seed": 2**64, "f": [1e300]})
    for data, message in [({"n": 2**53 + 1}, "'n' is 9.0072e+15, beyond any real value (at most 9.0072e+15)"),
                          ({"n": 10**400}, "'n' is an integer of 401 digits, beyond any real value"),
                          ({"x": float("inf")}, "'x' is inf (NaN or infinite)"),
                          ({"d": 10**400}, "'d' is an integer of 401 digits, beyond any real value"),
                          ({"free": {"a": {"b": float("nan")}}}, "'free.a.b' is nan (NaN or infinite)"),
                          ({"free": {"a": 2**64 + 1}}, "'free.a' is an integer of 20 digits, outside"),
                          ({"free": {"a": "x" * 20_000}}, "'free.a' holds 20,000 characters, more than 16,384"),
                          ({"free": {"a": [[[[]]]] * 2}}, None)]:
        row = {"n": 1, "x": 1.0, "d": 0.0, "free": {}, **data}
        if message is None:
            load(row)
            continue
        with pytest.raises(ResultFormatError) as err:
            load(row)
        assert message in str(err.value)
    deep: list = []
    for _ in range(c.MAX_DEPTH + 1):
        deep = [deep]
    with pytest.raises(ResultFormatError, match="nested more than 64 deep"):
        load({"n": 1, "x": 1.0, "d": 0.0, "free": {"a": deep}})
