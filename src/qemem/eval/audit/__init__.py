"""The LLM-judged audits of a run folder: the claim audit (are the cards' claims supported by
their cited sources?) and the answer audit (are the answers' claims grounded in the
conversation?)."""

from qemem.eval.audit.answers import audit_answers
from qemem.eval.audit.claims import audit_claims

__all__ = ["audit_answers", "audit_claims"]
