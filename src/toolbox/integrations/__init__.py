"""Governed toolbox tools inside agent frameworks, one module per framework.

Each module is an outer room behind its own extra and imports its framework
when it is imported; this package imports none of them, so ``import
toolbox.integrations`` works whatever is installed:

- `toolbox.integrations.pydantic_ai`: a pydantic-ai toolset
  (``pip install "toolbox-registry[pydantic-ai]"``);
- the OpenAI Agents SDK (``[openai-agents]``) and LangChain (``[langchain]``)
  rooms, in modules of the same shape.

Every integration takes a `toolbox.Gateway` and a way to get the trusted
`toolbox.ExecutionContext` from the framework's run context, never from what
the model sends. See docs/integrations.md.
"""

__all__: list[str] = []
