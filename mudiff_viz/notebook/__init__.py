"""The public Python API and its notebook side: decode from Python, play traces inline, frames.

``import mudiff_viz as mv`` re-exports what is public here (mudiff_viz/__init__.py); the CLI's
``decode`` calls :func:`mudiff_viz.notebook.api.decode`, so both take one code path. docs/notebook.md.
"""
