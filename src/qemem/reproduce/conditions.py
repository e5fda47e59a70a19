"""The conditions file (``qemem-reproduce/1``) and its pinned figures, read and checked."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from qemem.errors import InputError

FORMAT = "qemem-reproduce/1"
PINNED_FORMAT = "qemem-reproduce-pinned/1"
PLACEHOLDER = re.compile(r"\{([a-z_]+)(?::([A-Za-z0-9_.-]+))?\}")
KNOWN = {"data", "beam", "embedder", "llm", "judge", "out", "store", "repo"}
#: the kinds of data a condition runs on: the bundled sample, a LoCoMo file, a BEAM file
DATA_KINDS = ("sample", "locomo", "beam")


@dataclass(frozen=True)
class Run:
    """One command of the conditions file, run at most once per invocation."""

    name: str
    command: str
    output: str  # "stdout" (its last line, one JSON document) or a file path template
    script: bool = False  # a benchmark script of the source checkout, not a qemem command
    uses_llm: bool = False

    def needs(self) -> list[str]:
        """The runs whose output folder this one's command or output names (``{out:NAME}``)."""
        text = f"{self.command} {self.output}"
        return [
            m.group(2) for m in PLACEHOLDER.finditer(text) if m.group(1) == "out" and m.group(2)
        ]


@dataclass(frozen=True)
class Reference:
    """A figure the method publishes: one value, or one per backbone (a model name)."""

    values: dict[str, float | str]  # a number, or a range as the method states it ("0.03-0.04")
    source: str

    def for_llm(self, llm: str | None) -> dict[str, float | str]:
        """The values whose backbone the LLM spec names, or all when it names none of them."""
        hit = {k: v for k, v in self.values.items() if llm and k != "*" and k in llm}
        return hit or self.values


@dataclass(frozen=True)
class Figure:
    """One figure of a condition: where it is in a run's output, how it is graded."""

    name: str
    run: str
    path: tuple[str, ...]
    tolerance: float = 0.0
    pinned: bool = True
    reference: Reference | None = None


@dataclass(frozen=True)
class Condition:
    """One figure of the method's evaluation, with the runs that produce it."""

    name: str
    title: str
    description: str
    data: tuple[str, ...]  # of DATA_KINDS: "locomo" and "beam" need --data
    figures: tuple[Figure, ...]
    pending: str | None = None

    def runs(self) -> list[str]:
        """The runs its figures are read from, in first-use order."""
        return list(dict.fromkeys(f.run for f in self.figures))


@dataclass(frozen=True)
class Conditions:
    """A whole conditions file."""

    path: Path
    runs: dict[str, Run]
    conditions: dict[str, Condition]
    embedders: dict[str, str] = field(default_factory=dict)  # default embedder per data kind

    @property
    def pinned_path(self) -> Path:
        """Where ``--record`` writes the pinned figures: ``<stem>.pinned.yaml`` beside it."""
        return self.path.with_name(self.path.stem + ".pinned.yaml")

    def order(self, run: str) -> list[str]:
        """``run`` after every run it needs, each once."""
        seen: list[str] = []

        def visit(name: str, chain: tuple[str, ...]) -> None:
            if name in chain:
                raise InputError(f"runs need each other: {' -> '.join((*chain, name))}")
            if name in seen:
                return
            for dep in self.runs[name].needs():
                visit(dep, (*chain, name))
            seen.append(name)

        visit(run, ())
        return seen


def default_path() -> Path:
    """The conditions file shipped with the package."""
    return Path(str(resources.files("qemem").joinpath("reproduce/conditions.yaml")))


def bundled_sample() -> Path:
    """The sample conversation shipped with the package (what CI reproduces on)."""
    return Path(str(resources.files("qemem").joinpath("data/sample.json")))


def bundled_beam_sample() -> Path:
    """The BEAM-format sample shipped with the package (two hand-written chats converted by
    ``qemem data beam``): what the BEAM conditions run on in CI."""
    return Path(str(resources.files("qemem").joinpath("data/beam_sample.json")))


def _mapping(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise InputError("expected a mapping", file=where)
    return value


def _reference(value: Any, where: str) -> Reference:
    raw = _mapping(value, where)
    values = raw.get("value")
    if isinstance(values, int | float | str):
        values = {"*": values}
    if not isinstance(values, dict) or not values:
        raise InputError("a reference needs value: a number or {backbone: number}", file=where)
    parsed = {str(k): v if isinstance(v, str) else float(v) for k, v in values.items()}
    return Reference(parsed, str(raw.get("source", "")))


def _figure(name: str, raw: dict[str, Any], runs: dict[str, Run], where: str) -> Figure:
    run = raw.get("run")
    if run not in runs:
        raise InputError(f"figure {name!r} names run {run!r}, which the file lacks", file=where)
    path = raw.get("path")
    parts = tuple(str(p) for p in path) if isinstance(path, list) else tuple(str(path).split("."))
    if not path or not all(parts):
        raise InputError(f"figure {name!r} needs a path (a.b.c or a list of keys)", file=where)
    ref = raw.get("reference")
    return Figure(
        name=name,
        run=run,
        path=parts,
        tolerance=float(raw.get("tolerance", 0.0)),
        pinned=bool(raw.get("pinned", True)),
        reference=_reference(ref, f"{where}: {name}") if ref is not None else None,
    )


def _run(name: str, raw: dict[str, Any], where: str) -> Run:
    command = raw.get("command") or raw.get("script")
    if not isinstance(command, str) or not command.strip():
        raise InputError(f"run {name!r} needs a command (or a script)", file=where)
    run = Run(
        name=name,
        command=command,
        output=str(raw.get("output", "stdout")),
        script="script" in raw,
        uses_llm=bool(raw.get("uses_llm", False)),
    )
    for m in PLACEHOLDER.finditer(f"{run.command} {run.output}"):
        if m.group(1) not in KNOWN:
            raise InputError(f"run {name!r}: unknown placeholder {m.group(0)}", file=where)
    return run


def load_conditions(path: Path | None = None) -> Conditions:
    """Read and check a conditions file (default: the one shipped with qemem)."""
    path = path or default_path()
    where = str(path)
    try:
        raw = _mapping(yaml.safe_load(path.read_text(encoding="utf-8")), where)
    except (OSError, yaml.YAMLError) as exc:
        raise InputError(f"cannot read the conditions file: {exc}", file=where) from None
    if raw.get("format") != FORMAT:
        raise InputError(f"not a {FORMAT} file (format: {raw.get('format')!r})", file=where)
    runs = {n: _run(n, _mapping(r, where), where) for n, r in _mapping(raw["runs"], where).items()}
    for run in runs.values():
        missing = [d for d in run.needs() if d not in runs]
        if missing:
            raise InputError(f"run {run.name!r} needs unknown runs {missing}", file=where)
    conditions: dict[str, Condition] = {}
    for name, c in _mapping(raw["conditions"], where).items():
        c = _mapping(c, where)
        figures = tuple(
            _figure(str(f), _mapping(v, where), runs, f"{where}: {name}")
            for f, v in _mapping(c.get("figures"), where).items()
        )
        data = tuple(c.get("data", ["sample", "locomo"]))
        if not figures or not set(data) <= set(DATA_KINDS):
            raise InputError(
                f"condition {name!r}: needs figures; data {'|'.join(DATA_KINDS)}", file=where
            )
        conditions[name] = Condition(
            name=name,
            title=str(c.get("title", name)),
            description=str(c.get("description", "")).strip(),
            data=data,
            figures=figures,
            pending=c.get("pending"),
        )
    result = Conditions(path, runs, conditions, dict(raw.get("embedders", {})))
    for run_name in runs:
        result.order(run_name)  # refuses cycles now
    return result


def load_pinned(path: Path) -> dict[str, list[dict[str, Any]]]:
    """The pinned records per condition (none when the file does not exist)."""
    if not path.exists():
        return {}
    raw = _mapping(yaml.safe_load(path.read_text(encoding="utf-8")), str(path))
    if raw.get("format") != PINNED_FORMAT:
        raise InputError(f"not a {PINNED_FORMAT} file", file=str(path))
    return {str(k): list(v) for k, v in _mapping(raw.get("records", {}), str(path)).items()}


PINNED_HEADER = (
    "# Pinned figures of conditions.yaml, written by `qemem reproduce --record`: do not edit by\n"
    "# hand. One record per condition and (data sha256, embedder, LLM when its runs use one).\n"
)


def save_pinned(path: Path, records: dict[str, list[dict[str, Any]]]) -> None:
    """Write the pinned records (sorted, so a re-record's diff shows only what moved)."""
    ordered = {
        name: sorted(recs, key=lambda r: (r["data"], r["embedder"], str(r.get("llm"))))
        for name, recs in sorted(records.items())
    }
    body = yaml.safe_dump(
        {"format": PINNED_FORMAT, "records": ordered}, sort_keys=True, allow_unicode=True
    )
    path.write_text(PINNED_HEADER + body, encoding="utf-8")
