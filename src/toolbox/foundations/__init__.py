"""The bottom layer: descriptors, the execution context, budgets, redaction, small shared text rules.

Private modules that import nothing above `toolbox.errors`; the public names are
re-exported by `toolbox` and `toolbox.registry._provider`.
"""
