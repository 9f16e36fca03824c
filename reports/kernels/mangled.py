"""Itanium-mangled kernel names (ROCm traces print `_ZN...`) read back into approximate C++, so that
`reports.kernels.short_names` shortens them like any demangled name."""

from __future__ import annotations

import re

#: What stands for a part of a mangled name this sketch does not read.
UNREADABLE = "…"

_BUILTINS = {
    "v": "void", "b": "bool", "c": "char", "a": "signed char", "h": "unsigned char", "s": "short",
    "t": "unsigned short", "i": "int", "j": "unsigned int", "l": "long", "m": "unsigned long", "x": "long long",
    "y": "unsigned long long", "f": "float", "d": "double", "e": "long double", "n": "__int128",
    "o": "unsigned __int128", "w": "wchar_t",
}
_DF = {"DF16b": "bfloat16", "DF16_": "_Float16", "DF32_": "_Float32", "DF64_": "_Float64", "Dh": "half",
       "Dn": "nullptr_t", "Di": "char32_t", "Ds": "char16_t", "Du": "char8_t"}
_MAX_DEPTH = 40


class _Unreadable(Exception):
    """The mangled name uses a form this sketch does not read."""


def sketch_mangled(text: str) -> str | None:
    """An Itanium-mangled name as approximate C++: qualified name and template arguments.

    Reads nested names, source names, template arguments, literals and builtin types; a
    substitution (`S_`), a template parameter or anything rarer becomes "…". None if even the
    kernel's own name cannot be read.
    """
    reader = _Mangled(text, 2)
    try:
        name = reader.name(0)
    except (_Unreadable, IndexError, ValueError):
        return None
    return name or None


class _Mangled:
    def __init__(self, text: str, pos: int) -> None:
        self.text, self.pos = text, pos

    def peek(self, n: int = 1) -> str:
        return self.text[self.pos:self.pos + n]

    def take(self, n: int = 1) -> str:
        out = self.text[self.pos:self.pos + n]
        if len(out) < n:
            raise _Unreadable("end of name")
        self.pos += n
        return out

    def source_name(self) -> str:
        match = re.compile(r"\d+").match(self.text, self.pos)
        if not match:
            raise _Unreadable("no source name")
        self.pos = match.end()
        ident = self.take(int(match.group()))
        return "(anonymous namespace)" if ident.startswith("_GLOBAL__N") else ident

    def name(self, depth: int) -> str:
        """<name>: nested `N...E`, or an unscoped source name, each with template arguments."""
        if depth > _MAX_DEPTH:
            raise _Unreadable("too deep")
        if self.peek() == "L":
            self.take()
        if self.peek() != "N":
            ident = self.source_name()
            return ident + (self.template_args(depth) if self.peek() == "I" else "")
        self.take()
        while self.peek() in ("r", "V", "K"):
            self.take()
        parts: list[str] = []
        while self.peek() != "E":
            if self.peek(2) == "St":
                self.take(2)
                parts.append("std")
            elif self.peek() == "S":
                self.substitution()
                parts.append(UNREADABLE)
            elif self.peek() == "I":
                if not parts:
                    raise _Unreadable("arguments without a name")
                parts[-1] += self.template_args(depth)
            elif self.peek().isdigit():
                parts.append(self.source_name())
            else:
                raise _Unreadable(f"nested-name piece {self.peek()!r}")
        self.take()
        while parts and parts[0] == UNREADABLE:  # a substituted prefix is a scope already named
            parts.pop(0)
        return "::".join(parts) or UNREADABLE

    def substitution(self) -> None:
        self.take()  # S
        while self.peek() != "_":
            if not self.peek().isalnum():
                raise _Unreadable("bad substitution")
            self.take()
        self.take()

    def template_args(self, depth: int) -> str:
        self.take()  # I
        args: list[str] = []
        try:
            while self.peek() != "E":
                args.append(self.arg(depth + 1))
            self.take()
        except _Unreadable:
            self.pos = len(self.text)  # the rest of the name is beyond this sketch
            args.append(UNREADABLE)
        return "<" + ", ".join(args) + ">"

    def arg(self, depth: int) -> str:
        head = self.peek()
        if head == "L":
            self.take()
            kind = self.type(depth)
            match = re.compile(r"n?\d+").match(self.text, self.pos)
            value = match.group().replace("n", "-") if match else ""
            self.pos = match.end() if match else self.pos
            if self.take() != "E":
                raise _Unreadable("literal")
            return ("true" if value == "1" else "false") if kind == "bool" else value
        if head == "J":
            self.take()
            parts = []
            while self.peek() != "E":
                parts.append(self.arg(depth + 1))
            self.take()
            return ", ".join(parts)
        return self.type(depth)

    def type(self, depth: int) -> str:
        if depth > _MAX_DEPTH:
            raise _Unreadable("too deep")
        head = self.peek()
        if head in _BUILTINS:
            self.take()
            return _BUILTINS[head]
        for code, spelled in _DF.items():
            if self.text.startswith(code, self.pos):
                self.take(len(code))
                return spelled
        if head in ("P", "R", "K", "V"):
            self.take()
            inner = self.type(depth + 1)
            return inner + {"P": "*", "R": "&", "K": " const", "V": " volatile"}[head]
        if head == "N" or head.isdigit():
            return self.name(depth + 1)
        if head in ("S", "T"):
            if self.peek(2) == "St":
                self.take(2)
                return "std::" + self.name(depth + 1)
            self.substitution()
            return UNREADABLE + (self.template_args(depth) if self.peek() == "I" else "")
        raise _Unreadable(f"type {head!r}")
