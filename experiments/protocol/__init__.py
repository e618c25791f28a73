"""The image protocol of docs/protocol.md: its tables and plots from the committed run
files, and what experiments/protocol/run.sh and adaptive_buffer.sh ask of Python (each
module's docstring says what it does and how it is called)."""
