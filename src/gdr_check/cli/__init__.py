"""The command-line interface: argument parsing and rendering only; the work is done by the library."""
