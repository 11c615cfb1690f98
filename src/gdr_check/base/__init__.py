"""The base every stage uses: errors, diagnostics and reports, tensor descriptions, limits, file names and the
rule registry. Imports nothing above it."""
