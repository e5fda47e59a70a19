"""The evidence viewer: self-contained HTML pages of one answer and of a whole evaluation run.

Pages are rendered from Jinja2 templates shipped with the package, with inline CSS and a small
plain script; they load nothing from the network. Conversation text reaches the page only as
escaped template output or as JSON that the script inserts as text, never as markup.

The viewer renders records, never objects: an answer's JSON form
(:func:`qemem.answer.wire.answer_to_json`), a run's results.jsonl records, its summary and
source dicts. The harness (:mod:`qemem.eval`) and the CLI call it; it imports neither them nor
``qemem.memory`` or ``qemem.answer``.
"""

from qemem.view.record import evidence_record
from qemem.view.render import answer_html
from qemem.view.report import report_html

__all__ = ["answer_html", "evidence_record", "report_html"]
