"""Gradio wiring only: every callback calls a tested function elsewhere."""
