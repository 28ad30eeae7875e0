"""What a tool is and how it is found: policy, providers, discovery, namespaces, the intent phase.

Private modules; the public names are re-exported by `toolbox` and, for provider
authors, `toolbox.registry._provider`.
"""
