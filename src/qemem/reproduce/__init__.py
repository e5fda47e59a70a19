"""Reproductions as data: the method's figures from one conditions file (``qemem reproduce``)."""

from qemem.reproduce.conditions import Condition, Conditions, Figure, Run, load_conditions
from qemem.reproduce.expect import FigureResult, RunOutcome
from qemem.reproduce.grading import FAIL, OK, OKISH, extract, grade
from qemem.reproduce.runner import ConditionResult, Runner, Settings, run_conditions

__all__ = [
    "FAIL",
    "OK",
    "OKISH",
    "Condition",
    "ConditionResult",
    "Conditions",
    "Figure",
    "FigureResult",
    "Run",
    "RunOutcome",
    "Runner",
    "Settings",
    "extract",
    "grade",
    "load_conditions",
    "run_conditions",
]
