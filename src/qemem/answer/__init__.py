"""Answering: evidence assembly, the answer call, ``ask`` (the method end to end), and
``check`` (a statement's claims labelled against the conversation)."""

from qemem.answer.ask import MODES, Answer, AskConfig, Mode, Round0Answer, Trace, ask
from qemem.answer.assemble import Assembly, assemble, assemble_pool
from qemem.answer.check import CheckedClaim, CheckResult, Citation, check_statement
from qemem.answer.extract import ABSTENTION_PATTERNS, extract_final_answer, is_abstention
from qemem.answer.reply import Asking, Reply, answer_candidates, answer_question

__all__ = [
    "ABSTENTION_PATTERNS",
    "MODES",
    "Answer",
    "AskConfig",
    "Asking",
    "Assembly",
    "CheckResult",
    "CheckedClaim",
    "Citation",
    "Mode",
    "Reply",
    "Round0Answer",
    "Trace",
    "answer_candidates",
    "answer_question",
    "ask",
    "assemble",
    "assemble_pool",
    "check_statement",
    "extract_final_answer",
    "is_abstention",
]
