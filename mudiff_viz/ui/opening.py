"""Opening the app on a link (ui/links.py): select the tab, load the lesson or trace, seek the frame."""

from __future__ import annotations

import gradio as gr

from mudiff_viz.ui import howitworks, lessons_tab, viewer_tab
from mudiff_viz.ui.common import user_errors
from mudiff_viz.ui.links import Link, parse_link, trace_file
from mudiff_viz.ui.results import ordered

LESSON_KEYS = tuple(x.key for x in howitworks.LESSONS)


def link_outputs(link: Link) -> tuple[str | None, dict, dict]:
    """(tab to select, lesson outputs, viewer outputs) for a link; empty dicts leave a tab as it is."""
    if link.lesson is not None:
        out = lessons_tab.recorded_view(link.lesson)
        if link.frame is not None and isinstance(out.get("player"), dict):
            out["player"]["start_frame"] = link.frame
        return "how", out, {}
    if link.traces:
        out = viewer_tab.replay([str(trace_file(n)) for n in link.traces])
        if link.frame is not None and isinstance(out.get("player"), dict):
            out["player"]["start_frame"] = link.frame
        return "viewer", {}, out
    return None, {}, {}


def wire(demo: gr.Blocks, tabs: gr.Tabs, lessons: lessons_tab.LessonsTab, viewer: viewer_tab.ViewerTab) -> None:
    """On page load: open what the page's link names (nothing happens without one)."""
    n_buttons = len(lessons.outputs) - len(lessons_tab.SHOWN_OUTPUTS)

    @user_errors
    def open_link(request: gr.Request):
        link = parse_link(dict(request.query_params) if request is not None else {}, LESSON_KEYS)
        tab, lesson, view = link_outputs(link)
        if tab is None:
            return (gr.skip(),) * (2 + len(lessons.outputs) + len(viewer.outputs))
        shown = True if lesson else gr.skip()  # the tab's first view must not reopen lesson 1 over the link
        buttons = lessons_tab.button_variants(link.lesson) if lesson else [gr.skip()] * n_buttons
        return (gr.Tabs(selected=tab), shown, *ordered(lesson, lessons_tab.SHOWN_OUTPUTS), *buttons,
                *ordered(view, viewer_tab.OUTPUTS))

    demo.load(open_link, None, [tabs, lessons.shown, *lessons.outputs, *viewer.outputs], api_visibility="private",
              show_progress="hidden")
