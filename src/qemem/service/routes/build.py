"""Building episodes and facts in the background, and the jobs that do it (rows of the store:
any server process, of any replica, answers for any job)."""

from __future__ import annotations

from typing import Annotated

from fastapi import FastAPI, Query, Request, Response

from qemem.errors import LLMError
from qemem.memory.jobs import MAX_JOBS_PAGE, Job
from qemem.service.auth import Reader, Writer
from qemem.service.problems import error_responses
from qemem.service.schemas import MAX_ID_CHARS
from qemem.service.state import State, existing_conversation
from qemem.store.jobs import JobStatus

NEXT_CURSOR = "X-Next-Cursor"
"""The response header of ``GET /v1/jobs`` with the cursor of the next page."""


def build(conversation: str, key: Writer, state: State) -> Job:
    """Start building episodes and facts in the background (needs the server's LLM);
    poll ``GET /v1/jobs/{job_id}``. A build queued or running for it is returned instead."""
    memory = state.memory(key.namespace)
    existing_conversation(memory, conversation)
    if memory.llm is None:
        raise LLMError(
            "building episodes and facts needs an LLM: start the server with QEMEM_LLM set "
            "(e.g. anthropic:claude-haiku-4-5; fake for an offline trial)"
        )
    job = memory.enqueue_build(conversation)
    state.worker.wake()
    return job


def list_jobs(
    key: Reader,
    state: State,
    request: Request,
    response: Response,
    status: JobStatus | None = None,
    limit: Annotated[int, Query(ge=1, le=MAX_JOBS_PAGE, description="jobs per page")] = 50,
    cursor: Annotated[
        str | None,
        Query(
            max_length=MAX_ID_CHARS,
            description="the page after this one: a response's X-Next-Cursor",
        ),
    ] = None,
) -> list[Job]:
    """A page of the caller's jobs (only those of ``status``, when given), newest first. When
    more follow, the ``X-Next-Cursor`` header holds the ``cursor`` of the next page (and the
    ``Link`` header its URL, ``rel="next"``)."""
    memory = state.memory(key.namespace)
    page = memory.jobs(status, limit=limit, before=cursor)
    if len(page) == limit and memory.jobs(status, limit=1, before=page[-1].id):
        response.headers[NEXT_CURSOR] = page[-1].id
        following = request.url.include_query_params(cursor=page[-1].id)
        # relative (RFC 8288): right behind a proxy that rewrites the host
        response.headers["Link"] = f'<{following.path}?{following.query}>; rel="next"'
    return page


def get_job(job_id: str, key: Reader, state: State) -> Job:
    """A job's status, progress (done/total), attempts and, once done, its reports."""
    return state.memory(key.namespace).job(job_id)


def cancel_job(job_id: str, key: Writer, state: State) -> Job:
    """Cancel a queued or running job (a running build stops at its next step; what it stored
    stays and a later build resumes from it). A finished job is returned unchanged."""
    return state.memory(key.namespace).cancel_job(job_id)


def register(app: FastAPI) -> None:
    """Add these routes to ``app``."""
    app.add_api_route(
        "/v1/conversations/{conversation}/build",
        build,
        methods=["POST"],
        tags=["build"],
        status_code=202,
        responses=error_responses(403, 404, 503),
    )
    app.add_api_route(
        "/v1/jobs",
        list_jobs,
        methods=["GET"],
        tags=["build"],
        responses=error_responses(404)
        | {200: {"headers": {NEXT_CURSOR: {"description": "the next page's cursor, if any"}}}},
    )
    app.add_api_route(
        "/v1/jobs/{job_id}",
        get_job,
        methods=["GET"],
        tags=["build"],
        responses=error_responses(404),
    )
    app.add_api_route(
        "/v1/jobs/{job_id}",
        cancel_job,
        methods=["DELETE"],
        tags=["build"],
        responses=error_responses(403, 404),
    )
