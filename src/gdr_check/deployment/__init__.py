"""A deployment of a model: engine settings, TP size, dtypes (`settings`) and the decode path the engine takes
(`decode_path`)."""
