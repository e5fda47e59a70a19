"""The operations that build episodes and facts, and those on the background jobs that do it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields
from typing import Any

from pydantic import TypeAdapter

from qemem.build import BuildReport
from qemem.memory.jobs import Job
from qemem.operations.schemas import JobsQuery
from qemem.operations.spec import LLMNeed, Operation, Route

NEXT_CURSOR = "X-Next-Cursor"
"""The response header of ``GET /v1/jobs`` with the cursor of the next page."""

_REPORTS = TypeAdapter(list[BuildReport])
_JOB = "/v1/jobs/{job_id}"


def job_of(data: Mapping[str, Any]) -> Job:
    """A job from its JSON (fields this client does not know are left out)."""
    known = {f.name for f in fields(Job)}
    reports = _REPORTS.validate_python(data["reports"])
    return Job(**{k: v for k, v in data.items() if k in known} | {"reports": reports})


JOBS = (
    Operation("build", "write", cli="build"),
    Operation(
        "enqueue_build",
        "write",
        Route(
            "POST",
            "/v1/conversations/{conversation}/build",
            "build",
            """
    Start building episodes and facts in the background (needs the server's LLM);
    poll ``GET /v1/jobs/{job_id}``. A build queued or running for it is returned instead.""",
            "build",
            (403, 404, 503),
            response=Job,
            status=202,
        ),
        llm=LLMNeed("building episodes and facts"),
        decode=job_of,
    ),
    Operation(
        "jobs",
        "read",
        Route(
            "GET",
            "/v1/jobs",
            "list_jobs",
            """
    A page of the caller's jobs (only those of ``status``, when given), newest first. When
    more follow, the ``X-Next-Cursor`` header holds the ``cursor`` of the next page (and the
    ``Link`` header its URL, ``rel="next"``).""",
            "build",
            (404,),
            query=JobsQuery,
            response=list[Job],
            response_headers={NEXT_CURSOR: "the next page's cursor, if any"},
        ),
        rename={"before": "cursor"},
        cli="jobs list",
        decode=lambda out: [job_of(j) for j in out],
    ),
    Operation(
        "job",
        "read",
        Route(
            "GET",
            _JOB,
            "get_job",
            "A job's status, progress (done/total), attempts and, once done, its reports.",
            "build",
            (404,),
            response=Job,
        ),
        cli="jobs show",
        decode=job_of,
    ),
    Operation(
        "cancel_job",
        "write",
        Route(
            "DELETE",
            _JOB,
            "cancel_job",
            """
    Cancel a queued or running job (a running build stops at its next step; what it stored
    stays and a later build resumes from it). A finished job is returned unchanged.""",
            "build",
            (403, 404),
            response=Job,
        ),
        cli="jobs cancel",
        decode=job_of,
    ),
)
