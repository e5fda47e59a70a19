"""Schemathesis against the app's own OpenAPI schema: no generated input yields a 5xx, and
every response has a documented status and content type. (Bodies are not checked against the
JSON Schema: qemem's date-times are naive, local to the conversation, which JSON Schema's
"date-time" format rejects.)

Bounded (a few examples per operation) and deterministic (derandomized Hypothesis)."""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    status_code_conformance,
)

from service_helpers import MESSAGES, served

EXAMPLES = 8
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
]


@pytest.mark.slow
def test_no_generated_input_gives_a_server_error() -> None:
    with served() as s:
        auth = s.auth(s.alice)
        s.client.post("/v1/conversations/c1/messages", json={"messages": MESSAGES}, headers=auth)
        schema = schemathesis.openapi.from_asgi("/openapi.json", s.app)
        operations = [result.ok() for result in schema.get_all_operations()]
        assert len(operations) >= 10

        for operation in operations:

            @given(case=operation.as_strategy())
            @settings(
                max_examples=EXAMPLES,
                derandomize=True,
                deadline=None,
                database=None,
                suppress_health_check=list(HealthCheck),
            )
            def check(case: schemathesis.Case) -> None:
                case.call_and_validate(headers=auth, checks=CHECKS)

            check()
