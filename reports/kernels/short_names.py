"""Kernel and op names short enough for a table cell, yet still the name a kernel engineer knows.

A CUDA kernel name as Kineto or Nsight print it is a whole C++ signature, often thousands of
characters: `void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>,
at::detail::Array<char*, 1> >(int, at::native::FillFunctor<float>, at::detail::Array<char*, 1>)`.
Cutting that in the middle at a fixed width leaves `void at::native::vectori…char*, 1>)`, which
names nothing. This module keeps the words that identify the kernel instead, and drops the rest
in a fixed order, from the least to the most informative, only as far as the width asks:

1. Always (the *full* form): the return type (`void `; CUDA kernels return nothing, so it says
   nothing), the parameter list `(...)` at the end, PyTorch's internal scopes (`at::native::`,
   `at::detail::`, `at::`, `c10::`, `(anonymous namespace)::`) and the space in `> >`.
2. *Compact*: template arguments become `<…>`, with two exceptions. A short list of plain scalar
   arguments (`<float>`, `<BFloat16, 8, 2>`: at most 16 characters with its brackets) stays, as it
   tells the variants apart. A generic wrapper keeps the argument that carries the kernel's
   identity, recursively: `cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_128x128_16x4_nn_align4>`,
   `vectorized_elementwise_kernel<FillFunctor<float>>`, `reduce_kernel<ReduceOp<MeanOps<…>>>`
   (an argument that is a lambda inside a function is named by that function:
   `launch_clamp_scalar`). The kernel's own namespace stays (`cudnn::`, `cub::`).
3. *Terse*: the namespace goes (`winogradForwardFilter4x4<…>`, `native_batch_norm_backward`);
   wrapper chains collapse to their ends (`reduce_kernel<MeanOps>`), and a pure wrapper
   (cutlass `Kernel`/`Kernel2`/`device_kernel`, ck_tile `kentry`) gives way to what it wraps
   (`cutlass_80_tensorop_s1688gemm_128x128_16x4_nn_align4`).
4. Only if the terse form is still too long, it is cut with "…" at a word boundary: after `_`,
   `::`, `<`, `,`, `/`, `.`, `-`, `#`, a space or a closing bracket, or, when the last of those
   would waste more than half the room, at a camelCase hump or between a lower-case letter and a
   digit; never inside a word. A name with no boundary in reach at all (one 80-letter word in a
   20-column cell) is cut hard. After the ellipsis the cut keeps the end that tells kernels
   apart: a closing template argument list, which holds what a wrapper wraps, as long as the
   head keeps its first word (`vectorized_elementwise_…<FillFunctor>`); else the last word, in up
   to a third of the room (`triton_poi_fused_…_0`, `…:Tanh`) or half of it for a direction word
   (`native_batch_…_backward`). If even that loses what a wrapper wraps, the wrapped name is
   shown alone (`FillFunctor` in a 16-column cell rather than `vectorized_…`).

Itanium-mangled names (`_ZN7ck_tile6kentryILi1E…`, as ROCm traces hold them) are first sketched
as C++ (`ck_tile::kentry<1, Rmsnorm2dFwd<…>>`) by a small reader of the common forms; what it
cannot read becomes "…". Names that are not C++ at all (`Memset (Device)`, TensorFlow's
`scope/op:Type`, `nn.Module: Linear_22`) pass unchanged to the cutting step.

Within one table, names stay unique (`unique_short_names`): where two different kernels would read
the same (`implicit_convolve_sgemm<…>` twice), each first takes its compact or full form if those
fit and differ; else the words that tell them apart are kept, found by comparing their full forms
word by word (difflib), and the rest elided: `implicit_convolve_sgemm<…5, 5…3…>` beside
`implicit_convolve_sgemm<…6, 7…5…>`, `cunn_ClassNLLCriterion_updateOutput…` beside
`cunn_ClassNLLCriterion_updateGradInput…`; where even that does not fit or still collides, the
shared short name is numbered (`… #1`, `… #2`, in table order).

This is display only: JSON output always keeps the full name. Control characters are escaped first
(`printable`), so the result is safe to print.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass
from difflib import SequenceMatcher
from typing import NamedTuple, Union

from tbd.core.errors import UsageError
from tbd.reports.kernels.mangled import sketch_mangled
from tbd.reports.printable import printable

ELLIPSIS = "…"
ELIDED = "<" + ELLIPSIS + ">"
#: A cut may follow any of these (and `::`, never a lone first `:` of it).
CUT_AFTER = frozenset("_:<>,/.-# )]}")
#: Longest plain template argument list (brackets included) that the compact form keeps.
SIMPLE_ARGS_MAX = 16

#: Wrappers whose identity is the argument they wrap; the terse form shows the argument alone.
PURE_WRAPPERS = frozenset({"Kernel", "Kernel2", "device_kernel", "kentry"})
#: Launch templates and functor adaptors: their name matters (vectorized or not, cast or not), but
#: the kernel's identity is the first argument that is not a number, a scalar type or plumbing.
WRAPPERS = PURE_WRAPPERS | frozenset({
    "vectorized_elementwise_kernel", "unrolled_elementwise_kernel", "elementwise_kernel",
    "elementwise_kernel_manual_unroll", "vectorized_templated_elementwise_kernel", "index_elementwise_kernel",
    "reduce_kernel", "_scatter_gather_elementwise_kernel", "distribution_elementwise_grid_stride_kernel",
    "distribution_nullary_kernel", "multi_tensor_apply_kernel", "gpu_kernel_impl", "gpu_kernel_impl_nocast",
    "gpu_index_kernel", "BinaryFunctor", "BUnaryFunctor", "AUnaryFunctor", "ReduceOp", "func_wrapper_t",
    "uniform_and_transform", "normal_and_transform",
})
#: Last words that tell the two directions of the same op apart: a cut keeps them in up to half the room.
ROLE_WORDS = frozenset({"backward", "forward", "bwd", "fwd", "grad", "dgrad", "wgrad", "infer", "train"})
#: Template arguments that are how a launch template moves data, not what the kernel computes.
_PLUMBING = frozenset({
    "Array", "array", "TensorListMetadata", "TrivialOffsetCalculator", "OffsetCalculator", "LoadWithoutCast",
    "StoreWithoutCast", "LoadWithCast", "StoreWithCast", "CUDAGeneratorImpl", "PhiloxCudaState",
})
_SCALARS = frozenset({
    "void", "bool", "char", "signed", "unsigned", "short", "int", "long", "float", "double", "const", "volatile",
    "half", "Half", "BFloat16", "bfloat16", "bfloat16_t", "half_t", "tfloat32_t", "__half", "__nv_bfloat16",
    "__hip_bfloat16", "__nv_fp8_e4m3", "__nv_fp8_e5m2", "Float8_e4m3fn", "Float8_e5m2", "Float8_e4m3fnuz",
    "Float8_e5m2fnuz", "float2", "float4", "int2", "int4", "size_t", "int8_t", "uint8_t", "int16_t", "uint16_t",
    "int32_t", "uint32_t", "int64_t", "uint64_t", "complex", "decltype", "nullptr", "nullptr_t",
})
_LITERAL = re.compile(r"[-+]?\d[\w.]*|true|false|" + re.escape(ELLIPSIS))
_IDENT = re.compile(r"[A-Za-z_~][\w~]*")
_WORDS = re.compile(r"[A-Za-z_]\w*")
#: PyTorch's own scopes, dropped wherever they qualify a name (not `aten::`, the op namespace).
_NOISE_SCOPES = re.compile(r"\(anonymous namespace\)::|\{anonymous\}::|(?<![\w:])(?:at::(?:native::|detail::)?|c10::)")
_RETURN_TYPE = re.compile(r"(?:(?:static|inline|__global__|extern)\s+)*void"
                          r"|(?:typename\s+)?(?:std::)?enable_if(?:_t)?<.*>(?:::type)?")
_CV = re.compile(r"^(?:(?:const|volatile|typename|struct|class|enum)\s+)+")
_TRAILER = re.compile(r"(?:\s|const\b|volatile\b|noexcept\b|&)*")
_FIRST_WORD = re.compile(r"[^A-Za-z0-9]*[A-Za-z0-9]+(?:::|[^A-Za-z0-9])")
_TAIL = re.compile(r"(?:::|[_:/.\-# ])[A-Za-z0-9]+$")
_CLOSE = {"<": ">", "(": ")", "{": "}", "[": "]"}
_OPEN_OF = {v: k for k, v in _CLOSE.items() if k != "<"}


@dataclass(frozen=True)
class _Group:
    """A bracketed part of a name: `<...>`, `(...)`, `{...}` or `[...]` (unclosed if the name ends inside)."""

    open: str
    body: tuple[Union[str, "_Group"], ...]
    closed: bool = True


_Seq = tuple[Union[str, _Group], ...]


class NameForms(NamedTuple):
    """The forms of one name, richest first (rules 1 to 3 of the module docstring)."""

    full: str
    compact: str
    terse: str
    #: What a launch template or functor adaptor wraps (`FillFunctor` in
    #: `vectorized_elementwise_kernel<FillFunctor>`); the terse form for any other name.
    core: str


def short_kernel_name(name: str, max_chars: int) -> str:
    """`name` in at most `max_chars` characters, shortened by the rules in the module docstring.

    The richest form that fits wins (full, compact, terse); failing all three, the terse form is
    cut at a word boundary with "…", unless the cut would lose what a wrapper wraps: then that
    alone is shown (`FillFunctor` rather than `vectorized_…`). Raises UsageError if max_chars < 1.
    """
    if max_chars < 1:
        raise UsageError(f"cannot shorten a name to {max_chars} characters")
    forms = kernel_name_forms(name)
    for form in forms[:3]:
        if len(form) <= max_chars:
            return form
    cut = cut_name(forms.terse, max_chars)
    if forms.core != forms.terse and not cut.endswith(f"<{forms.core}>"):
        return cut_name(forms.core, max_chars)
    return cut


def unique_short_names(names: list[str], max_chars: int) -> list[str]:
    """`short_kernel_name` of each of `names`, made unique among different names (module docstring).

    The same name given twice reads the same; different names never do, as long as max_chars leaves room
    for a number. Raises UsageError if max_chars < 1.
    """
    shorts = [short_kernel_name(n, max_chars) for n in names]
    readers: dict[str, list[str]] = defaultdict(list)
    for name, short in zip(names, shorts):
        if name not in readers[short]:
            readers[short].append(name)
    chosen = {name: short for name, short in zip(names, shorts)}
    for short, group in readers.items():
        if len(group) > 1:
            apart = _told_apart(group, max_chars)
            if len(apart) < len(group) or len(set(apart.values())) < len(group):  # no words to tell them by
                apart = {name: _numbered(short, k, max_chars) for k, name in enumerate(group, 1)}
            chosen.update(apart)
    out = [chosen[n] for n in names]
    seen: dict[str, str] = {}
    for i, (name, text) in enumerate(zip(names, out)):  # a told-apart form may meet another table row's
        k = 1
        while seen.setdefault(out[i], name) != name:
            k += 1
            out[i] = _numbered(text, k, max_chars)
    return out


def _numbered(text: str, k: int, max_chars: int) -> str:
    mark = f" #{k}"
    return cut_name(text, max(1, max_chars - len(mark))) + mark


_TOKEN = re.compile(r"[A-Za-z]+|\d+")


def _told_apart(group: list[str], max_chars: int) -> dict[str, str]:
    """Names that read alike, each in a form that differs from the others' (module docstring)."""
    forms = [kernel_name_forms(n) for n in group]
    for level in ("compact", "full"):
        texts = [getattr(f, level) for f in forms]
        if len(set(texts)) == len(texts) and all(len(t) <= max_chars for t in texts):
            return dict(zip(group, texts))
    words = [[m for m in _TOKEN.finditer(f.full)] for f in forms]
    out = {}
    for i, name in enumerate(group):
        kept: set[int] = set()
        mine = [m.group() for m in words[i]]
        for j in range(len(group)):
            if j != i:
                matcher = SequenceMatcher(None, mine, [m.group() for m in words[j]], autojunk=False)
                for tag, i1, i2, _, _ in matcher.get_opcodes():
                    if tag != "equal":
                        kept.update(range(i1, i2))
        text = _kept_words(forms[i].full, words[i], sorted(kept), max_chars)
        if text is not None:
            out[name] = text
    return out


def _kept_words(full: str, words: list[re.Match], kept: list[int], max_chars: int) -> str | None:
    """`full` with only its base name and the words at `kept` (runs of adjacent ones with what lies between
    them), the rest elided with "…"; the base cut at a word boundary if need be; None if it cannot fit."""
    if not kept:
        return None
    runs: list[list[int]] = []
    for k in kept:
        if runs and k == runs[-1][-1] + 1:
            runs[-1].append(k)
        else:
            runs.append([k])
    open_at = full.find("<")
    first = words[runs[0][0]].start()
    base_end = first if open_at < 0 or first <= open_at else open_at + 1
    head = full[:base_end]
    body = ELLIPSIS.join(full[words[r[0]].start():words[r[-1]].end()] for r in runs)
    if words[runs[0][0]].start() > base_end and full[base_end:words[runs[0][0]].start()].strip(" ,<_:"):
        body = ELLIPSIS + body
    end = words[runs[-1][-1]].end()
    rest = full[end:]
    tail = (ELLIPSIS if rest.strip(" ,>)_") else "") + (">" if full.endswith(">") and ">" not in body[-1:] else "")
    if runs[-1][-1] == len(words) - 1:
        tail = rest if len(rest) <= 2 else ELLIPSIS
    text = head + body + tail
    if len(text) <= max_chars:
        return text
    head = head.rsplit("::", 1)[-1] if "::" in head.split("<", 1)[0] else head
    room = max_chars - len(body) - len(tail)
    if room < min(len(head), 8):
        return None
    head = head if len(head) <= room else cut_name(head, room)
    if head.endswith(ELLIPSIS) and body.startswith(ELLIPSIS):
        body = body[len(ELLIPSIS):]
    return head + body + tail


def kernel_name_forms(name: str) -> NameForms:
    """The full, compact, terse and core forms of `name`, control characters escaped."""
    text = printable(name).strip()
    if text.startswith("_Z"):
        text = sketch_mangled(text) or text
    seq = _signature_name(_parse(_NOISE_SCOPES.sub("", text)))
    full = _render(seq).strip()
    comps = _components(seq)
    if not full or not comps:
        return NameForms(full, full, full, full)
    compact = "::".join(_show(c, compact=True, outer=True) for c in comps).strip() or full
    last = _plain_component(seq) or comps[-1]
    terse = _show(last, compact=False, outer=True).strip() or compact
    return NameForms(full, compact, terse, _core(last) or terse)


def cut_name(text: str, max_chars: int) -> str:
    """`text` cut to `max_chars` characters with "…" at a word boundary, keeping a short last word.

    See rule 4 of the module docstring. Raises UsageError if max_chars < 1.
    """
    if max_chars < 1:
        raise UsageError(f"cannot shorten a name to {max_chars} characters")
    if len(text) <= max_chars:
        return text
    room = max_chars - len(ELLIPSIS)
    tail = _tail(text, room)
    head = _head(text[:len(text) - len(tail)], room - len(tail))
    first = _FIRST_WORD.match(text)
    if tail and len(head) < (len(first.group()) if first else 1):
        tail, head = "", _head(text, room)
    return (head or text[:room]) + ELLIPSIS + tail


def _tail(text: str, room: int) -> str:
    """What a cut keeps after the ellipsis: a closing template argument list (`<FillFunctor>`, what a
    wrapper wraps) if the head keeps at least its first word, else the last word if it takes at most
    a third of the room (half for a ROLE_WORDS one, such as `_backward`)."""
    if text.endswith(">"):
        depth = 0
        for p in range(len(text) - 1, 0, -1):
            depth += {">": 1, "<": -1}.get(text[p], 0)
            if depth == 0:
                return text[p:] if len(text) - p < room else ""
        return ""
    match = _TAIL.search(text)
    if not match or match.start() == 0:
        return ""
    word = match.group()
    share = 2 if word.lstrip("_:/.-# ").lower() in ROLE_WORDS else 3
    return word if len(word) <= room // share else ""


def _head(text: str, room: int) -> str:
    """The longest prefix of `text` of at most `room` characters that ends at a word boundary ('' if none)."""
    limit = min(room, len(text) - 1)
    sep = next((p for p in range(limit, 0, -1) if _boundary(text, p)), 0)
    if 2 * sep >= room:
        return text[:sep]
    hump = next((p for p in range(limit, sep, -1) if _hump(text[p - 1], text[p])), 0)
    return text[:max(sep, hump)]


def _boundary(text: str, p: int) -> bool:
    """Whether a cut may fall between text[p - 1] and text[p]: after a boundary character, but not
    inside `::` and not after the `_` that starts a word (`<_cuda_…` would name nothing)."""
    before = text[p - 1]
    if before not in CUT_AFTER or (before == ":" and text[p] == ":"):
        return False
    return before != "_" or (p >= 2 and text[p - 2].isalnum())


def _hump(before: str, after: str) -> bool:
    """A word boundary inside an identifier: camelCase (`winograd|Forward`, `16|H64`) or lower case then
    digits (`0d|1d`)."""
    return ((before.islower() or before.isdigit()) and after.isupper()) or (before.islower() and after.isdigit())


# --- parsing: brackets into a tree -----------------------------------------------------------------

#: Brackets nested deeper than this stay text: the forms are built recursively, and no real kernel name nests past
#: a few dozen (a hostile trace's name of 10,000 "<" would exhaust Python's recursion limit).
_MAX_DEPTH = 64


def _parse(text: str) -> _Seq:
    """`text` as a tree of brackets. `<` opens a template only right after a name; a `<` still open
    when an enclosing bracket closes was a comparison (`(8)<(0)`) and stays text."""
    stack: list[tuple[str, list]] = [("", [])]
    buf: list[str] = []

    def flush() -> None:
        if buf:
            stack[-1][1].append("".join(buf))
            buf.clear()

    def unwind_angle() -> None:  # an open "<" that never closed: back to text
        opener, items = stack.pop()
        stack[-1][1].extend([opener, *items])

    i = 0
    while i < len(text):
        if text.startswith("operator()", i):
            buf.append("operator()")
            i += len("operator()")
            continue
        ch = text[i]
        top = stack[-1][0]
        if len(stack) <= _MAX_DEPTH and (
                ch in "({[" or (ch == "<" and i > 0 and (text[i - 1].isalnum() or text[i - 1] in "_)" + ELLIPSIS)
                                and text[i + 1:i + 2] not in ("<", "="))):
            flush()
            stack.append((ch, []))
        elif top and ch == _CLOSE[top]:
            flush()
            opener, items = stack.pop()
            stack[-1][1].append(_Group(opener, _merge(items)))
        elif ch in _OPEN_OF and any(opener == _OPEN_OF[ch] for opener, _ in stack[1:]):
            flush()
            while stack[-1][0] != _OPEN_OF[ch]:
                unwind_angle()
            opener, items = stack.pop()
            stack[-1][1].append(_Group(opener, _merge(items)))
        else:
            buf.append(ch)
        i += 1
    flush()
    while len(stack) > 1:  # the name ends inside brackets: cut short by whoever wrote it
        opener, items = stack.pop()
        stack[-1][1].append(_Group(opener, _merge(items), closed=False))
    return _merge(stack[0][1])


def _merge(items: list) -> _Seq:
    """Items with neighbouring strings joined, groups rebuilt so that their bodies are merged too."""
    out: list = []
    for item in items:
        if isinstance(item, str) and out and isinstance(out[-1], str):
            out[-1] += item
        elif item != "":
            out.append(item)
    return tuple(out)


def _signature_name(seq: _Seq) -> _Seq:
    """The name part of a C++ signature: without the parameter list at the end and the return type."""
    items = list(seq)
    if items and isinstance(items[-1], str) and _TRAILER.fullmatch(items[-1]):
        trailer = items.pop()
    else:
        trailer = None
    if len(items) > 1 and _is_group(items[-1], "(") and _ends_name(items[-2]):
        items.pop()
    elif trailer is not None:
        items.append(trailer)
    for k in range(len(items) - 1, -1, -1):
        item = items[k]
        if isinstance(item, str) and " " in item.strip():
            before, _, after = item.rstrip().rpartition(" ")
            if _RETURN_TYPE.fullmatch(_render(tuple(items[:k]) + (before,)).strip()):
                return tuple(x for x in [after, *items[k + 1:]] if x != "")
            break
    return tuple(items)


def _ends_name(item: str | _Group) -> bool:
    if isinstance(item, _Group):
        return item.open == "<"
    return bool(item) and (item[-1].isalnum() or item[-1] in "_~" or item.endswith("operator()"))


def _is_group(item: object, opener: str) -> bool:
    return isinstance(item, _Group) and item.open == opener


def _split(seq: _Seq, sep: str) -> list[_Seq]:
    """`seq` split at `sep` in its top-level text."""
    parts: list[list] = [[]]
    for item in seq:
        if isinstance(item, str):
            pieces = item.split(sep)
            for n, piece in enumerate(pieces):
                if n:
                    parts.append([])
                if piece:
                    parts[-1].append(piece)
        else:
            parts[-1].append(item)
    return [tuple(p) for p in parts]


def _components(seq: _Seq) -> list[_Seq]:
    return [c for c in _split(seq, "::") if c]


def _render(seq: _Seq) -> str:
    return "".join(x if isinstance(x, str) else _render_group(x) for x in seq)


def _render_group(group: _Group) -> str:
    if group.open == "<":
        inner = ", ".join(_render(a).strip() for a in _split(group.body, ","))
    else:
        inner = _render(group.body)
    return group.open + inner + (_CLOSE[group.open] if group.closed else "")


# --- the compact and terse forms -------------------------------------------------------------------

def _ident(comp: _Seq) -> str:
    """A component's own identifier ('' for a lambda `{...}` or `operator()`)."""
    if not comp or not isinstance(comp[0], str):
        return ""
    lead = _CV.sub("", comp[0].strip())
    match = _IDENT.match(lead)
    if not match or match.group() == "operator":
        return ""
    return match.group()


def _plain_component(seq: _Seq) -> _Seq | None:
    """The last component of a qualified name that is a plain identifier: what names it.

    `launch_clamp_scalar(...)::{lambda()#1}::operator()() const::{lambda(float)#1}` is named by
    `launch_clamp_scalar`, `cub::DeviceRadixSortPolicy<...>::Policy800` by `Policy800`.
    """
    for comp in reversed(_components(seq)):
        if _ident(comp):
            return comp
    return None


def _template_args(comp: _Seq) -> list[_Seq] | None:
    if len(comp) > 1 and isinstance(comp[0], str) and _is_group(comp[1], "<"):
        return [a for a in _split(comp[1].body, ",") if a]
    return None


def _is_scalar_arg(arg: _Seq) -> bool:
    text = _render(arg).strip()
    return bool(_LITERAL.fullmatch(text)) or (
        bool(text) and not text.startswith("(") and all(w in _SCALARS for w in _WORDS.findall(text))
        and "::" not in text)


def _payload(args: list[_Seq]) -> _Seq | None:
    """A wrapper's identity: its first argument that is not a number, cast, scalar type or plumbing."""
    for arg in args:
        text = _render(arg).strip()
        if not text or _LITERAL.fullmatch(text) or text.startswith("(") or _is_scalar_arg(arg):
            continue
        comp = _plain_component(arg)
        if comp is not None and _ident(comp) not in _PLUMBING and _ident(comp) not in _SCALARS:
            return comp
    return None


def _show(comp: _Seq, *, compact: bool, outer: bool) -> str:
    """One component in the compact or terse form (rules 2 and 3 of the module docstring).

    outer: the kernel's own name (keeps its lead text and the `<…>` mark) rather than an argument
    inside it (its identifier alone).
    """
    ident = _ident(comp)
    if outer and comp and isinstance(comp[0], str):
        lead = comp[0].strip()
    else:
        lead = ident
    args = _template_args(comp)
    if not lead:
        # A lambda or operator(): shown as it is, its parameters elided.
        return "".join(x if isinstance(x, str) else _elided_group(x) for x in comp).strip()
    if args is None:
        # Not a template: a kernel's own name shows whole (`Memset (Device)`), an argument by its identifier.
        return _render(comp).strip() if outer else lead
    if ident in WRAPPERS:
        payload = _payload(args)
        if payload is not None:
            if compact:
                return f"{lead}<{_show(payload, compact=True, outer=False)}>"
            if not outer or ident in PURE_WRAPPERS:
                return _show(payload, compact=False, outer=outer)
            return f"{lead}<{_show(payload, compact=False, outer=False)}>"
    if compact and all(_is_scalar_arg(a) for a in args):
        full = _render_group(comp[1])  # type: ignore[arg-type]
        if len(full) <= SIMPLE_ARGS_MAX:
            return lead + full
    if not compact and not outer:
        return lead
    return lead + ELIDED


def _core(comp: _Seq) -> str | None:
    """What a (not pure) wrapper wraps, its chain collapsed (`MeanOps` in `reduce_kernel<ReduceOp<MeanOps>>`)."""
    args = _template_args(comp)
    if _ident(comp) not in WRAPPERS or _ident(comp) in PURE_WRAPPERS or args is None:
        return None
    payload = _payload(args)
    return None if payload is None else _show(payload, compact=False, outer=False)


def _elided_group(group: _Group) -> str:
    if group.open == "{":
        return "{" + "".join(x if isinstance(x, str) else _elided_group(x) for x in group.body) + "}"
    inner = ELLIPSIS if group.body else ""
    return group.open + inner + (_CLOSE[group.open] if group.closed else "")
