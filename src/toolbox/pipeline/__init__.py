"""The governed pipeline: one chain of small interceptors shared by both front doors."""
