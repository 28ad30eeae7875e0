"""The conformance matrix: every governance promise on every door, tool style and state store."""
