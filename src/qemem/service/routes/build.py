"""Building episodes and facts in the background, and the jobs that do it."""

from __future__ import annotations

from fastapi import FastAPI

from qemem.errors import LLMError, NotFoundError
from qemem.service.auth import Reader, Writer
from qemem.service.problems import error_responses
from qemem.service.schemas import Job
from qemem.service.state import State, existing_conversation


def build(conversation: str, key: Writer, state: State) -> Job:
    """Start building episodes and facts in the background (needs the server's LLM);
    poll ``GET /v1/jobs/{job_id}``. A build already running for it is returned instead."""
    memory = state.memory(key.namespace)
    existing_conversation(memory, conversation)
    if memory.llm is None:
        raise LLMError(
            "building episodes and facts needs an LLM: start the server with QEMEM_LLM set "
            "(e.g. anthropic:claude-haiku-4-5; fake for an offline trial)"
        )
    return state.jobs.start(
        key.namespace,
        conversation,
        lambda progress: memory.build(conversation, progress=progress),
    )


def get_job(job_id: str, key: Reader, state: State) -> Job:
    """A build job's status, progress (done/total) and, once done, its reports."""
    job = state.jobs.get(key.namespace, job_id)
    if job is None:
        raise NotFoundError(f"no job {job_id!r}")
    return job


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
        "/v1/jobs/{job_id}",
        get_job,
        methods=["GET"],
        tags=["build"],
        responses=error_responses(404),
    )
