"""What both APIs share (app.server.app): CORS only for the origins configured, and the limit on
requests in flight answered 429 in each API's shape."""

import threading

import pytest
import requests

ORIGIN = "https://example.org"
PREFLIGHT = {"Origin": ORIGIN, "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "content-type"}
BODY = {"q": "Hello world.", "source": "en", "target": "fr"}


def test_cors_is_off_unless_configured(server):
    assert requests.options(server.url + "translate", headers=PREFLIGHT).status_code == 405
    answer = requests.post(server.url + "translate", json=BODY, headers={"Origin": ORIGIN})
    assert answer.status_code == 200 and "access-control-allow-origin" not in answer.headers


@pytest.mark.parametrize("server", [{"cors_origins": (ORIGIN,)}], indirect=True)
def test_cors_lets_the_configured_origins_in(server):
    preflight = requests.options(server.url + "translate", headers=PREFLIGHT)
    assert preflight.status_code == 200 and preflight.headers["access-control-allow-origin"] == ORIGIN
    answer = requests.post(server.url + "translate", json=BODY, headers={"Origin": ORIGIN})
    assert answer.status_code == 200 and answer.headers["access-control-allow-origin"] == ORIGIN
    other = {**PREFLIGHT, "Origin": "https://elsewhere.example"}
    assert requests.options(server.url + "translate", headers=other).status_code == 400
    stranger = requests.post(server.url + "translate", json=BODY, headers={"Origin": "https://elsewhere.example"})
    assert "access-control-allow-origin" not in stranger.headers


@pytest.mark.parametrize("server", [{"limits": {"max_requests": 1}}], indirect=True)
def test_requests_beyond_the_limit_get_429(server):
    engine_free = threading.Event()
    server.server.worker.call(lambda pipeline: engine_free.wait())  # the engine busy: requests stay in flight
    held = {}
    holder = threading.Thread(target=lambda: held.setdefault("answer", requests.post(server.url + "translate", json=BODY)))
    holder.start()
    try:
        for _ in range(1000):  # until the held request is in flight
            refused = requests.get(server.url + "languages")
            if refused.status_code == 429:
                break
        assert refused.status_code == 429 and refused.json() == {"error": "Slowdown: too many requests at once"}
        deepl = requests.get(server.url + "v2/languages")
        assert deepl.status_code == 429 and deepl.json() == {"message": "too many requests at once"}
    finally:
        engine_free.set()
        holder.join()
    assert held["answer"].status_code == 200
    assert requests.get(server.url + "languages").status_code == 200
