#!/usr/bin/env python3
"""Fails when source files of one crate import each other in a circle.

Cargo already refuses a circle between crates; inside a crate nothing does,
and a circle there is a knot a newcomer has to read all at once (and the
next change copies). This reads every crate's `src/` as text: each file is a
module (`src/a.rs` and `src/a/mod.rs` are `crate::a`, `src/a/b.rs` is
`crate::a::b`), and a file imports another when it names a path into it:
`use crate::a::b::Name`, `super::Name`, `self::child::Name`, a child module's
name after `use` (2018 paths), or `crate::a::b::f()` and `child::f()` written
inline. A path
ties to the file that defines the name: the longest module prefix it names,
followed through that module's `pub use` re-exports (a crate root that hands
`Error` on is not where `Error` is read from). Comments and string literals
are not read.

    python3 scripts/check_import_circles.py [CRATES_DIR]

Prints every circle with the names that tie it and exits 1; prints the count
of files read and exits 0 when there is none. There are no exceptions: the
last crates with circles were taken apart in issue 50.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

PATH = re.compile(r"\b(crate|super|self)((?:\s*::\s*[A-Za-z_][A-Za-z0-9_]*)+)")
USE = re.compile(r"\buse\s+([^;]+);", re.S)
REEXPORT = re.compile(r"\bpub(?:\s*\([^)]*\))?\s+use\s+([^;]+);", re.S)
ALIAS = re.compile(r"\s+as\s+([A-Za-z_][A-Za-z0-9_]*)")
CHILD_PATH = re.compile(r"(?<![:\w])([a-z_][a-z0-9_]*)((?:\s*::\s*[A-Za-z_][A-Za-z0-9_]*)+)")
IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def strip_comments_and_strings(text: str) -> str:
    """The code without comments, string literals (raw ones too) and char
    literals, each replaced by a space so that no path is read inside them."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end
        elif text.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if text.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif text.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    i += 1
            out.append(" ")
        elif re.match(r'b?r#*"', text[i:i + 20]) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            prefix = re.match(r'b?r(#*)"', text[i:]).group(0)
            hashes = prefix.count("#")
            end = text.find('"' + "#" * hashes, i + len(prefix))
            i = n if end < 0 else end + 1 + hashes
            out.append(" ")
        elif c == '"':
            i += 1
            while i < n and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
            i += 1
            out.append(" ")
        elif c == "'" and re.match(r"'(\\.|[^\\'])'", text[i:i + 12]):
            i += len(re.match(r"'(\\[^']*|[^\\'])'", text[i:]).group(0))
            out.append(" ")
        else:
            out.append(c)
            i += 1
    return "".join(out)


def without_test_modules(code: str) -> str:
    """The code less its `#[cfg(test)] mod … { … }` blocks: a test module's
    `super` is the file itself, and tests are not the structure."""
    while True:
        match = re.search(r"#\[cfg\(test\)\]\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+\w+\s*\{", code)
        if not match:
            return code
        depth, index = 1, match.end()
        while index < len(code) and depth:
            depth += {"{": 1, "}": -1}.get(code[index], 0)
            index += 1
        code = code[: match.start()] + code[index:]


def expand_use(tree: str) -> list[str]:
    """`a::{b, c::{d, e}}` as `a::b`, `a::c::d`, `a::c::e` (`self` in a group
    is the group's own path)."""
    tree = re.sub(r"\s+", "", tree)
    if "{" not in tree:
        return [tree]
    head, _, rest = tree.partition("{")
    inner = rest[: rest.rfind("}")]
    parts, depth, start = [], 0, 0
    for index, character in enumerate(inner):
        if character == "{":
            depth += 1
        elif character == "}":
            depth -= 1
        elif character == "," and depth == 0:
            parts.append(inner[start:index])
            start = index + 1
    parts.append(inner[start:])
    paths = []
    for part in filter(None, parts):
        if part == "self":
            paths.append(head.rstrip(":"))
        else:
            paths.extend(head + path for path in expand_use(part))
    return paths


def module_of(source_root: Path, file: Path) -> tuple[str, ...]:
    relative = file.relative_to(source_root).with_suffix("")
    parts = relative.parts
    if parts in (("lib",), ("main",)):
        return ()
    if parts[-1] == "mod":
        parts = parts[:-1]
    return tuple(parts)


def crate_files(source_root: Path) -> dict[tuple[str, ...], Path]:
    files = {}
    for file in sorted(source_root.rglob("*.rs")):
        if "bin" in file.relative_to(source_root).parts:
            continue  # each binary is a crate of its own
        files[module_of(source_root, file)] = file
    return files


def resolve(segments: list[str], here: tuple[str, ...], modules, reexports, depth=0):
    """The module file a path names and the name it takes from it, or None
    when it leaves the crate or stays in `here`. A name the module only
    re-exports resolves to where the re-export points."""
    first, rest = segments[0], segments[1:]
    if first == "crate":
        base: tuple[str, ...] = ()
    elif first == "super":
        base = here[:-1]
        while rest and rest[0] == "super":
            base, rest = base[:-1], rest[1:]
    elif first == "self":
        base = here
    elif here + (first,) in modules:
        base, rest = here, segments
    else:
        return None
    path = base + tuple(rest)
    for length in range(len(path), -1, -1):
        if path[:length] in modules:
            target = path[:length]
            name = path[length] if length < len(path) else (path[-1] if path else "crate")
            forwarded = reexports.get(target, {}).get(name) if length < len(path) else None
            if forwarded and depth < 10:
                return resolve(forwarded, target, modules, reexports, depth + 1)
            return (target, name) if target != here else None
    return None


def reexports_of(file: Path) -> dict[str, list[str]]:
    """The names a module hands on with `pub use`, and the paths they come from."""
    code = strip_comments_and_strings(file.read_text())
    names = {}
    for match in REEXPORT.finditer(code):
        for path in expand_use(match.group(1).replace(" as ", "__as__")):
            path, _, alias = path.partition("__as__")
            segments = [s for s in path.split("::") if s]
            if segments and segments[-1] != "*":
                names[alias or segments[-1]] = segments
    return names


def edges_of(file: Path, here, modules, reexports) -> dict[tuple[str, ...], set[str]]:
    code = without_test_modules(strip_comments_and_strings(file.read_text()))
    found: dict[tuple[str, ...], set[str]] = {}

    def add(path: str) -> None:
        segments = [s for s in re.split(r"::", path) if s]
        if not segments or not all(IDENTIFIER.fullmatch(s) for s in segments):
            return
        resolved = resolve(segments, here, modules, reexports)
        if resolved:
            found.setdefault(resolved[0], set()).add(resolved[1])

    for match in USE.finditer(code):
        tree = re.sub(r"\s+as\s+[A-Za-z_][A-Za-z0-9_]*", "", match.group(1))
        for path in expand_use(tree):
            add(path.removesuffix("::*"))
    for match in PATH.finditer(code):
        add(match.group(1) + re.sub(r"\s+", "", match.group(2)))
    # `child::item` written inline, for a child module of this one.
    for match in CHILD_PATH.finditer(code):
        if here + (match.group(1),) in modules:
            add(re.sub(r"\s+", "", match.group(0)))
    return found


def circles(graph: dict) -> list[list]:
    """Strongly connected components of more than one file (Tarjan's)."""
    index, low, stack, on_stack, result = {}, {}, [], set(), []
    counter = [0]

    def visit(node):
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for successor in graph.get(node, {}):
            if successor not in index:
                visit(successor)
                low[node] = min(low[node], low[successor])
            elif successor in on_stack:
                low[node] = min(low[node], index[successor])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                result.append(sorted(component))

    sys.setrecursionlimit(10000)
    for node in graph:
        if node not in index:
            visit(node)
    return result


def main() -> int:
    crates_dir = Path(sys.argv[1] if len(sys.argv) > 1 else "crates")
    found, read = [], 0
    for source_root in sorted(crates_dir.glob("*/src")):
        modules = crate_files(source_root)
        read += len(modules)
        reexports = {module: reexports_of(file) for module, file in modules.items()}
        graph = {module: edges_of(file, module, modules, reexports) for module, file in modules.items()}
        for component in circles(graph):
            found.append((source_root, modules, graph, component))
    for source_root, modules, graph, component in found:
        print(f"import circle: {', '.join(str(modules[m]) for m in component)}")
        for module in component:
            for target, names in sorted(graph[module].items()):
                if target in component:
                    print(f"  {modules[module]} -> {modules[target]}: {', '.join(sorted(names))}")
    if found:
        print(f"check_import_circles: {len(found)} circle(s) of imports between source files;"
              " move what both sides use into a module of its own")
        return 1
    print(f"check_import_circles: no circle among {read} source files")
    return 0

if __name__ == "__main__":
    sys.exit(main())
