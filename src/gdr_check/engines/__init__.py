"""The engines gdr-check models: one profile (data) per engine release epoch, in `profiles`."""
