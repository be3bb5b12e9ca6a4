"""app/session/pacing.py: the app's helper threads wait while typed text decodes."""

import threading

from dragoman.app.session.pacing import give_way


def test_a_helper_thread_giving_way_waits_while_typed_text_decodes_and_goes_on_after():
    typing, gone_on = threading.Event(), threading.Event()
    typing.set()
    helper = threading.Thread(target=lambda: (give_way(typing.is_set), gone_on.set()))
    helper.start()
    assert not gone_on.wait(0.1)
    typing.clear()
    assert gone_on.wait(5)
    helper.join()
