"""The front doors: the typed door (`Tools`), the by-name door (`Gateway`), and what they share.

Both doors resolve a tool in the `Catalog` and run every call through the governed
pipeline; routes are the compiled fast paths; `tool_calls` adapts the raw SDKs'
tool-call objects. The public names are re-exported by `toolbox`.
"""
