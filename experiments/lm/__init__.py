"""The language-model protocol of docs/lm_protocol.md: the reports of its runs beside
experiments/lm/run.sh (each module's docstring says what it does and how it is called)."""
