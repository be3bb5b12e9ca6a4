"""The local server under load: `python -m bench.server --checkpoint DIR --device cpu|cuda --clients 64`.

Starts `dragoman serve`'s app on 127.0.0.1 (a free port) with the checkpoint, then sends the same
sentences through the LibreTranslate API from 1 client and from `--clients` clients at once, each
request one sentence. Prints JSON: sentences/s for both, and the engine calls each needed (fewer
calls than requests: concurrent requests shared batches), and the latency of a sentence typed in
the window (bench.typed_latency's, submitted to the same engine as the window does) alone and while
the clients' run goes on. The clients run in a process of their own, as users' tools do, so that
their threads do not share the server's interpreter. The translation memory and cache are in a
temporary DRAGOMAN_HOME, and each run translates distinct sentences, so nothing is reused.
"""

from __future__ import annotations

import dragoman  # noqa: F401  (before anything that might import transformers: the checkout's kernels/)

import argparse
import json
import multiprocessing
import multiprocessing.pool
import os
import random
import statistics
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import requests

from bench.typed_latency import typed_ms


def sentences(count: int, seed: int) -> list[str]:
    words = "the a cat dog house river green small walks sees under over near quickly old city".split()
    rng = random.Random(seed)
    return [" ".join(rng.choice(words) for _ in range(rng.randint(8, 24))).capitalize() + "." for _ in range(count)]


def measure(url: str, texts: list[str], clients: int) -> float:
    """Sentences per second with `clients` sending one sentence a request."""
    connections = threading.local()  # each client thread keeps its HTTP connection

    def send(text: str) -> None:
        http = getattr(connections, "http", None) or requests.Session()
        connections.http = http
        answer = http.post(url + "translate", json={"q": text, "source": "en", "target": "fr"}, timeout=600)
        answer.raise_for_status()

    start = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        list(pool.map(send, texts))
    return len(texts) / (time.perf_counter() - start)


def clients_process() -> multiprocessing.pool.Pool:
    """A process for the clients (spawned: it shares nothing with the server's)."""
    return multiprocessing.get_context("spawn").Pool(1)


def typed_beside(url: str, server, translator, typed, args) -> dict:
    """The typed sentence's median latency while `--clients` clients send `--sentences` more, and
    whether they were still sending when the last typed sentence came back (else it measured nothing)."""
    with clients_process() as clients:
        calls = server.worker.batches
        running = clients.apply_async(measure, (url, sentences(args.sentences, seed=3), args.clients))
        while server.worker.batches == calls and not running.ready():  # the clients' sentences are decoding
            time.sleep(0.01)
        found = {"ms": round(statistics.median(typed_ms(translator, typed, args.typed)), 1),
                 "clients_still_sending": not running.ready()}
        running.get()
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--sentences", type=int, default=256, help="sentences sent in each run")
    parser.add_argument("--new-tokens", type=int, default=40, help="tokens each translation is forced to (0: not forced)")
    parser.add_argument("--typed", type=int, default=5, help="typed sentences timed alone and beside the clients (median)")
    args = parser.parse_args()
    os.environ["DRAGOMAN_HOME"] = tempfile.mkdtemp(prefix="dragoman-bench-")

    import uvicorn

    from dragoman.app.server import Server, listening_socket, uvicorn_config
    from dragoman.engine import Translator

    translator = Translator(args.checkpoint, device=args.device)
    typed = translator.default_options(num_beams=4, min_new_tokens=32, max_new_tokens=32)
    # Forced lengths, so that random weights do the work of real ones (DESIGN.md's document workload).
    forced = {"min_new_tokens": args.new_tokens, "max_new_tokens": args.new_tokens} if args.new_tokens else None
    server = Server(lambda: translator, overrides=forced)
    server.start()
    sock = listening_socket("127.0.0.1", 0)
    port = sock.getsockname()[1]
    http = uvicorn.Server(uvicorn_config(server.app, "127.0.0.1", port))
    thread = threading.Thread(target=http.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}/"
    try:
        measure(url, sentences(8, seed=0), 1)  # warm-up: kernels, graphs, connections
        typed_ms(translator, typed, 2)  # and the typed sentence's
        results: dict = {"typed_alone_ms": round(statistics.median(typed_ms(translator, typed, args.typed)), 1)}
        for name, clients, seed in (("one_client", 1, 1), ("many_clients", args.clients, 2)):
            calls = server.worker.batches
            with clients_process() as pool:
                rate = pool.apply(measure, (url, sentences(args.sentences, seed), clients))
            results[name] = {"clients": clients, "sentences_per_s": round(rate, 2),
                             "engine_calls": server.worker.batches - calls}
        results["speedup"] = round(results["many_clients"]["sentences_per_s"] / results["one_client"]["sentences_per_s"], 2)
        results["typed_beside_clients"] = typed_beside(url, server, translator, typed, args)
        print(json.dumps({"device": args.device, "sentences": args.sentences, "new_tokens": args.new_tokens, **results}))
    finally:
        http.should_exit = True
        thread.join()
        server.close()


if __name__ == "__main__":
    main()
