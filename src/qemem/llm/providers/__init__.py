"""Concrete providers; each imports its SDK lazily, only when constructed."""
