"""Page numbers as people count them (from 1) everywhere they are typed: the CLI's ``--page``, the
app's "PDF page" box and the notebook's ``page=``. The renderer and the trace store the 0-based
index (``page.page_index``); this is the one place that turns one into the other."""

from __future__ import annotations

from mudiff_viz.core.errors import UserInputError


def page_number(value) -> int:
    """A page number as typed (1-based; empty means 1), or a one-line error."""
    if value is None or value == "":
        return 1
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise UserInputError(f"the page number must be a whole number, got {value!r}") from None
    shown = f"{value:g}" if isinstance(value, (int, float)) else repr(value)
    if number != int(number):
        raise UserInputError(f"the page number must be a whole number, got {shown}")
    if number < 1:
        raise UserInputError(f"page numbers start at 1 (the first page is page 1), got {shown}")
    return int(number)


def page_index(value) -> int:
    """The 0-based index the renderer reads for page number ``value`` (1-based)."""
    return page_number(value) - 1
