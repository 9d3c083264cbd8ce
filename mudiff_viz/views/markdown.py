"""Text from outside (file names, a loaded trace's model name or metrics) made inert in Markdown.

Gradio's Markdown sanitises HTML, but Markdown itself can still pull in a remote image or a link;
escaping every Markdown and HTML character leaves plain text, whatever a trace or a file name holds.
"""

from __future__ import annotations

import re

_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|~<>&:])")


def md_text(value: object, limit: int = 200) -> str:
    """``value`` as literal text inside Markdown: one line, at most ``limit`` characters, escaped."""
    text = " ".join(str(value).split())[:limit]
    return _SPECIAL.sub(r"\\\1", text)
