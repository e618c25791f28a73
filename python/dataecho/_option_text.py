"""How a declared option reads in a docstring: one line, written by scripts/gen_spec.py into
the generated methods' docstrings and by _definition.py into the hand-written ones'.
Imports nothing, so that the script can load this file without the built extension."""


def option_line(name: str, takes: str, default: str, doc: str) -> str:
    """``name``: doc; what it takes; its default (or "required.")."""
    end = "required." if default == "required" else f"default {default}."
    return f"``{name}``: {doc}; {takes}; {end}"
