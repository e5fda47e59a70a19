"""Rendering pages from the package's Jinja2 templates (autoescaped, JSON embedded safely)."""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import Any

import jinja2
import markupsafe

from qemem.view.record import Data, evidence_record


@cache
def environment() -> jinja2.Environment:
    """The template environment: package templates, autoescaping on for every template."""
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("qemem.view", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.globals["asset"] = asset
    env.policies["json.dumps_kwargs"] = {"separators": (",", ":")}  # keep record order
    return env


@cache
def asset(name: str) -> markupsafe.Markup:
    """A packaged stylesheet or script, verbatim, for inlining into a page."""
    text = resources.files("qemem.view").joinpath("templates", name).read_text("utf-8")
    return markupsafe.Markup(text)


def render(template: str, **context: Any) -> str:
    """Render ``template`` with ``context``; JSON goes through ``tojson`` (which escapes
    ``<``, ``>``, ``&`` and quotes, so embedded text cannot close a script element)."""
    return environment().get_template(template).render(**context)


def answer_html(answer: Data) -> str:
    """The answer page of an answer's (full) JSON form: question, answer, cost, cards, cited
    turns, plan, rounds and pool (pool turns with their relative times resolved against their
    session dates)."""
    evidence = evidence_record(answer)
    evidence["pool_times"] = {
        tid: [f"{t['expression']} → {t['phrase']}" for t in times]
        for tid, times in answer["pool_times"].items()
    }
    return render("answer.html.j2", title=answer["question"], evidence=evidence)
