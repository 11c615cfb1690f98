"""Whole runs: a model check (`model_check`), the library API (`library`), the dry run (`dryrun`), each rule's
example (`example_runner`), the runtime guard (`guard`), `capture`, rule selection and `[tool.gdr-check]`
settings."""
