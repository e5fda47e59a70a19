"""Write the remote clients' methods from the operation table: ``python -m qemem.remote.generate``.

Each operation of :mod:`qemem.operations` becomes a method of ``RemoteMethods``
(:mod:`qemem.remote.sync_methods`) and a coroutine of ``AsyncRemoteMethods``
(:mod:`qemem.remote.aio_methods`), with the signature of its ``MemoryAPI`` method copied from
the source of :mod:`qemem.memory.api` (its docstring points there, so editing a docstring
needs no new output), that hands its arguments to :func:`qemem.remote.calls.steps`. The
output is laid out as ``ruff format`` lays it out; a test checks that the committed modules
are what this writes.
"""

from __future__ import annotations

import ast
import builtins
import inspect
import sys
from dataclasses import dataclass
from pathlib import Path

from qemem.memory import api
from qemem.operations import OPERATIONS

WIDTH = 100
"""The line length of the code base (ruff's)."""

HERE = Path(__file__).parent


@dataclass(frozen=True)
class Method:
    """One ``MemoryAPI`` method's signature as its source writes it."""

    name: str
    params: tuple[str, ...]
    returns: str
    names: frozenset[str]
    """The names its annotations and defaults use."""


def _segment(source: str, node: ast.AST) -> str:
    text = ast.get_source_segment(source, node)
    if text is None:
        raise ValueError(f"no source for {ast.dump(node)}")
    return text


def _param(source: str, arg: ast.arg, default: ast.expr | None) -> str:
    text = arg.arg
    if arg.annotation is not None:
        text += ": " + _segment(source, arg.annotation)
    if default is not None:
        text += (" = " if arg.annotation is not None else "=") + _segment(source, default)
    return text


def _method(source: str, node: ast.FunctionDef) -> Method:
    args = node.args
    positional = [*args.posonlyargs, *args.args]
    defaults = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    params = [_param(source, a, d) for a, d in zip(positional, defaults, strict=True)]
    if args.kwonlyargs:
        params.append("*")
        params += [
            _param(source, a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True)
        ]
    if node.returns is None:
        raise ValueError(f"MemoryAPI.{node.name} needs a return type")
    typed = [a.annotation for a in [*positional, *args.kwonlyargs] if a.annotation is not None]
    used = [*typed, *(d for d in [*args.defaults, *args.kw_defaults] if d is not None)]
    trees = [*used, node.returns]
    names = {n.id for tree in trees for n in ast.walk(tree) if isinstance(n, ast.Name)}
    return Method(
        node.name,
        tuple(params),
        _segment(source, node.returns),
        frozenset(names),
    )


def api_methods() -> tuple[dict[str, Method], dict[str, str]]:
    """``MemoryAPI``'s methods by name, in source order, and the module each name of
    :mod:`qemem.memory.api` comes from."""
    source = inspect.getsource(api)
    tree = ast.parse(source)
    origin: dict[str, str] = {}
    methods: dict[str, Method] = {}
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module:
            origin |= {alias.asname or alias.name: node.module for alias in node.names}
        elif isinstance(node, ast.ClassDef) and node.name == "MemoryAPI":
            for item in node.body:
                if isinstance(item, ast.FunctionDef):
                    methods[item.name] = _method(source, item)
        elif isinstance(node, ast.ClassDef | ast.FunctionDef):
            origin[node.name] = api.__name__
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            origin |= {t.id: api.__name__ for t in targets if isinstance(t, ast.Name)}
    return methods, origin


def _header(method: Method, prefix: str) -> list[str]:
    """The ``def`` line(s), wrapped as ruff wraps them: on one line, else the parameters on
    one line of their own, else one per line."""
    params = ", ".join(method.params)
    start, end = f"    {prefix}def {method.name}(", f") -> {method.returns}:"
    if len(start) + len(params) + len(end) <= WIDTH:
        return [start + params + end]
    if 8 + len(params) <= WIDTH:
        return [start, "        " + params, "    " + end]
    return [start, *(f"        {p}," for p in method.params), "    " + end]


def _body(method: Method, is_async: bool) -> list[str]:
    wait = "await " if is_async else ""
    call = f'{wait}self._run(calls.steps("{method.name}", locals()))'
    return [
        f'        """As ``MemoryAPI.{method.name}``."""',
        f"        result: {method.returns} = {call}",
        "        return result",
    ]


def _sort_key(name: str) -> tuple[int, str]:
    """ruff's (isort's) order within an import: constants, classes, then the rest."""
    kind = 0 if name.isupper() else 1 if name[:1].isupper() else 2
    return kind, name


def _imports(by_module: dict[str, set[str]]) -> str:
    """The import lines: the standard library's, then qemem's, each sorted by module (as
    ruff's isort writes them)."""
    groups: dict[bool, list[str]] = {False: [], True: []}
    for module in sorted(by_module):
        members = sorted(by_module[module], key=_sort_key)
        line = f"from {module} import {', '.join(members)}"
        wrapped = [f"from {module} import (", *(f"    {m}," for m in members), ")"]
        groups[module.split(".")[0] == "qemem"] += [line] if len(line) <= WIDTH else wrapped
    return "\n".join([*groups[False], "", *groups[True]])


TEMPLATE = '''"""{doc}

Generated from the operation table (:mod:`qemem.operations`) and ``MemoryAPI`` by
``python -m qemem.remote.generate``: do not edit.
"""

from __future__ import annotations

{imports}

T = TypeVar("T")


class {name}(ABC):
    """{class_doc}"""

    @abstractmethod
    {prefix}def _run(self, steps: calls.Steps[T]) -> T:
        """Drive an operation's steps (:mod:`qemem.remote.calls`) to its result."""
'''


def module(is_async: bool) -> str:
    """The source of the sync (or async) methods' module."""
    methods, origin = api_methods()
    declared = [m for name, m in methods.items() if name in {op.name for op in OPERATIONS}]
    by_module: dict[str, set[str]] = {
        "abc": {"ABC", "abstractmethod"},
        "typing": {"TypeVar"},
        "qemem.remote": {"calls"},
    }
    for name in {n for m in declared for n in m.names} - set(vars(builtins)):
        by_module.setdefault(origin[name], set()).add(name)
    prefix = "async " if is_async else ""
    client = "AsyncRemoteMemory" if is_async else "RemoteMemory"
    text = TEMPLATE.format(
        doc=f"The ``MemoryAPI`` operations of ``{client}``: each one call of ``calls.steps``.",
        imports=_imports(by_module),
        name="AsyncRemoteMethods" if is_async else "RemoteMethods",
        class_doc=f"What ``{client}`` does for each operation: its ``_run`` drives the steps.",
        prefix=prefix,
    )
    for method in declared:
        text += "\n" + "\n".join([*_header(method, prefix), *_body(method, is_async)]) + "\n"
    return text


def sources() -> dict[Path, str]:
    """Each generated module's path and source."""
    return {HERE / "sync_methods.py": module(False), HERE / "aio_methods.py": module(True)}


def main() -> None:
    for path, text in sources().items():
        path.write_text(text, encoding="utf-8")
        print(f"wrote {path}", file=sys.stderr)


if __name__ == "__main__":
    main()
