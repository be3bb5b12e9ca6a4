"""The local server under load: `python -m bench.server --checkpoint DIR --device cpu|cuda --clients 64`.

Starts `dragoman serve`'s app on 127.0.0.1 (a free port) with the checkpoint, then sends the same
sentences through the LibreTranslate API from 1 client and from `--clients` clients at once, each
request one sentence. Prints JSON: sentences/s for both, and the engine calls each needed (fewer
calls than requests: concurrent requests shared batches). The translation memory and cache are
in a temporary DRAGOMAN_HOME, and each run translates distinct sentences, so nothing is reused.
"""

from __future__ import annotations

import dragoman  # noqa: F401  (before anything that might import transformers: the checkout's kernels/)

import argparse
import json
import os
import random
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import requests


def sentences(count: int, seed: int) -> list[str]:
    words = "the a cat dog house river green small walks sees under over near quickly old city".split()
    rng = random.Random(seed)
    return [" ".join(rng.choice(words) for _ in range(rng.randint(8, 24))).capitalize() + "." for _ in range(count)]


def measure(url: str, texts: list[str], clients: int) -> float:
    """Sentences per second with `clients` sending one sentence a request."""
    session_of = threading.local()

    def send(text: str) -> None:
        session = getattr(session_of, "session", None) or requests.Session()
        session_of.session = session
        answer = session.post(url + "translate", json={"q": text, "source": "en", "target": "fr"}, timeout=600)
        answer.raise_for_status()

    start = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        list(pool.map(send, texts))
    return len(texts) / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--sentences", type=int, default=256, help="sentences sent in each run")
    args = parser.parse_args()
    os.environ["DRAGOMAN_HOME"] = tempfile.mkdtemp(prefix="dragoman-bench-")

    import uvicorn

    from dragoman.app.server import Server, listening_socket, uvicorn_config
    from dragoman.engine import Translator

    server = Server(lambda: Translator(args.checkpoint, device=args.device))
    server.start()
    sock = listening_socket("127.0.0.1", 0)
    port = sock.getsockname()[1]
    http = uvicorn.Server(uvicorn_config(server.app, "127.0.0.1", port))
    thread = threading.Thread(target=http.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}/"
    try:
        measure(url, sentences(8, seed=0), 1)  # warm-up: kernels, graphs, connections
        results = {}
        for name, clients, seed in (("one_client", 1, 1), ("many_clients", args.clients, 2)):
            calls = server.worker.batches
            rate = measure(url, sentences(args.sentences, seed), clients)
            results[name] = {"clients": clients, "sentences_per_s": round(rate, 2),
                             "engine_calls": server.worker.batches - calls}
        results["speedup"] = round(results["many_clients"]["sentences_per_s"] / results["one_client"]["sentences_per_s"], 2)
        print(json.dumps({"device": args.device, "sentences": args.sentences, **results}))
    finally:
        http.should_exit = True
        thread.join()
        server.close()


if __name__ == "__main__":
    main()
