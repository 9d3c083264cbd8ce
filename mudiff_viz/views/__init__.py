"""Pure functions from a Trace to what the app shows: player payloads, plotly figures, tables, HTML.

Views never call a model and never touch Gradio; the UI only wires their results to components.
"""
