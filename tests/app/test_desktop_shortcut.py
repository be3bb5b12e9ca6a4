"""What Settings says a desktop offers for a global shortcut, and Ctrl+C twice as a rule of times."""

from dragoman.app.desktop_shortcut import DOUBLE_COPY_SECONDS, DoubleCopy, shortcut_advice


def test_each_desktop_is_told_what_it_offers():
    wayland = shortcut_advice("wayland", "wayland")
    assert wayland.startswith("Wayland: bind `dragoman popup` to a key in your desktop's keyboard settings; "
                              "no global shortcut can be registered by apps there.")
    assert shortcut_advice("offscreen", "wayland") == wayland  # the desktop says it where Qt's platform does not
    assert shortcut_advice("xcb", "x11").startswith("X11: bind `dragoman popup` to a key in your desktop's keyboard")
    assert "no global shortcut" in shortcut_advice("windows", "")


def test_the_same_text_copied_twice_quickly_is_a_double_copy():
    copies = DoubleCopy()
    assert not copies.copied("word", 10.0)
    assert copies.copied("word", 10.0 + DOUBLE_COPY_SECONDS)
    assert not copies.copied("word", 11.0)  # a third copy starts a new pair
    assert not copies.copied("word", 11.0 + DOUBLE_COPY_SECONDS + 0.01)  # too slow
    assert not copies.copied("other", 11.6)  # another text
    assert not copies.copied("  ", 20.0) and not copies.copied("  ", 20.1)  # nothing to translate
