"""Token <-> ground-truth alignment: page boxes for decoded tokens, and metrics."""

from mudiff_viz.core.align import char_map, diff_ops, token_boxes
from mudiff_viz.core.metrics import cer, normalized_edit_distance

GT = [(c, (10.0 * i, 0.0, 10.0 * i + 9, 20.0)) for i, c in enumerate("hello world")]


def test_exact_tokens_get_their_characters_boxes():
    boxes = token_boxes(list("hello world"), GT)
    assert boxes[0] == (0.0, 0.0, 9.0, 20.0) and boxes[10] == (100.0, 0.0, 109.0, 20.0)


def test_multi_character_tokens_take_the_union():
    boxes = token_boxes(["hel", "lo", " wor", "ld"], GT)
    assert boxes[0] == (0.0, 0.0, 29.0, 20.0)
    assert boxes[2] == (60.0, 0.0, 89.0, 20.0)  # the space's box is ignored when letters map


def test_substitutions_map_and_insertions_sit_between_neighbours():
    boxes = token_boxes(list("hellX o world"), GT)  # one substitution-free insertion 'X'
    assert all(b is not None for b in boxes)
    x = boxes[4]
    assert boxes[3][2] <= x[0] <= boxes[5][0]
    sub = token_boxes(list("hellp world"), GT)
    assert sub[4] == (40.0, 0.0, 49.0, 20.0)


def test_char_map_and_diff():
    assert char_map("abc", "abc") == [0, 1, 2]
    assert char_map("axc", "abc") == [0, 1, 2]
    assert char_map("ac", "abc")[1] == 2
    assert [op[0] for op in diff_ops("abXd", "abcd")] == ["equal", "replace", "equal"]


def test_metrics():
    assert cer("hello", "hello") == 0.0
    assert cer("hxllo", "hello") == 0.2
    assert cer("", "") == 0.0
    assert normalized_edit_distance("abc", "abcdef") == 0.5
