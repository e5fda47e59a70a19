"""Who takes part in a conversation, and what kind of conversation it is, from its messages.

A conversation whose messages carry roles (``user``, ``assistant``, ``other``; see
:data:`qemem.models.Role`) is a user's conversation with an assistant: the user's statements are
the facts about the user, the assistant's replies what was advised or produced, and the user's
standing instructions and preferences apply to every later answer. Without roles (LoCoMo) the
speakers are people talking with each other. Prompts name the participants and the kind of
conversation from here, never "people" for a conversation with an assistant.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from qemem.models import Role, Turn
from qemem.prompts import as_data, render


def _listed(names: Sequence[str]) -> str:
    """Names as prose: ``A``, ``A and B``, ``A, B and C``."""
    if not names:
        return "the participants"
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def _titled(role: str, name: str) -> str:
    """``the user`` for a speaker named after the role, else ``the user (Ana)``."""
    return f"the {role}" if name.lower() == role else f"the {role} ({name})"


@dataclass(frozen=True)
class Participants:
    """The speakers of a conversation in order of appearance and the role of each one that
    has a role (the first role a speaker's messages give)."""

    speakers: tuple[str, ...]
    roles: dict[str, Role] = field(default_factory=dict)

    @classmethod
    def of(cls, speakers: Iterable[str], turns: Iterable[Turn] = ()) -> Participants:
        """The participants of a conversation: its ``speakers`` and the roles its ``turns``
        give them (a speaker of a turn not listed is added)."""
        names = [as_data(s) for s in speakers]
        roles: dict[str, Role] = {}
        for turn in turns:
            name = as_data(turn.speaker)
            if name not in names:
                names.append(name)
            if turn.role is not None:
                roles.setdefault(name, turn.role)
        return cls(tuple(dict.fromkeys(names)), roles)

    @property
    def with_assistant(self) -> bool:
        """Whether this is a user's conversation with an assistant (some speaker has a role)."""
        return bool(self.roles)

    def having(self, role: Role) -> list[str]:
        """The speakers of ``role``, in order."""
        return [s for s in self.speakers if self.roles.get(s) == role]

    @property
    def user(self) -> str:
        """How prompts name the user: ``the user`` or ``the user (Ana)``; several users are
        named together."""
        users = self.having("user")
        return "the user" if len(users) != 1 else _titled("user", users[0])

    @property
    def names(self) -> str:
        """The participants as prompts name them: ``Caroline and Melanie``; with an assistant
        ``the user and the assistant`` (a speaker not named after its role in brackets, an
        ``other`` participant by name)."""
        if not self.with_assistant:
            return _listed(list(self.speakers))
        named = []
        for speaker in self.speakers:
            role = self.roles.get(speaker, "other")
            named.append(speaker if role == "other" else _titled(role, speaker))
        return _listed(named)

    @property
    def conversation(self) -> str:
        """The conversation as prompts introduce it: ``a long conversation between Caroline
        and Melanie`` or ``a long conversation between the user and the assistant (the user's
        chat with an AI assistant)``."""
        if self.with_assistant:
            return (
                f"a long conversation between {self.names} (the user's chat with an AI assistant)"
            )
        return f"a long conversation between {self.names}"

    @property
    def subjects(self) -> str:
        """Whom durable facts are about: ``the people`` or the user and their work."""
        if self.with_assistant:
            return f"{self.user} (their situation, work, projects, plans and wishes)"
        return "the people"

    @property
    def entities(self) -> str:
        """What a conversation of this kind names, for retrieval queries."""
        if self.with_assistant:
            return "tools, libraries, projects, files, numbers, dates, names, places"
        return "people, places, objects, activities"

    def prompt_fields(self) -> dict[str, str]:
        """The fields prompts name the participants with (see ``qemem/prompts``):
        ``speakers``, ``conversation``, ``subjects``, ``who`` (a title names them), ``user``,
        ``entities``, ``claim_names`` (how a claim names them), and the rules a conversation
        with an assistant adds: ``roles_rule`` (what each side's messages are), ``name_rule``
        (how a narrative names them) and ``kind_rule`` (facts typed as instructions and
        preferences); the rules are empty or the people's versions otherwise."""
        assistant = self.with_assistant
        fields = {
            "speakers": self.names,
            "conversation": self.conversation,
            "subjects": self.subjects,
            "who": self.user if assistant else "the people",
            "user": self.user,
            "entities": self.entities,
            "claim_names": f"naming {self.names} instead of pronouns"
            if assistant
            else "with people's names instead of pronouns",
        }
        rules = {
            "roles_rule": render("rule_roles", **fields) if assistant else "",
            "name_rule": render(
                "rule_names_assistant" if assistant else "rule_names_people", **fields
            ),
            "kind_rule": render("rule_kinds") if assistant else "",
        }
        return fields | rules
