"""`dragoman serve` as users start it: a real process, an installed model named by --model, the line
that says where it listens, and what a second server on the same port is told."""

import re
import signal
import subprocess
import sys

import requests

from dragoman.app.server import listening_socket

DRAGOMAN = [sys.executable, "-m", "dragoman.app.cli"]
LISTENING = re.compile(r"dragoman: listening on http://127\.0\.0\.1:(\d+) \(LibreTranslate and DeepL APIs; Ctrl\+C stops\)\n")


def test_serve_listens_on_loopback_with_an_installed_model(tiny_checkpoint, paths):
    subprocess.run([*DRAGOMAN, "models", "import", str(tiny_checkpoint), "--name", "tiny"], check=True,
                   capture_output=True)
    # The CPU's default dtype is int8: its weights are quantised once into the weights cache.
    server = subprocess.Popen([*DRAGOMAN, "serve", "--model", "tiny", "--port", "0", "--device", "cpu"],
                              stderr=subprocess.PIPE, text=True)
    try:
        line = server.stderr.readline()
        listening = LISTENING.fullmatch(line)
        assert listening, line
        answer = requests.post(f"http://127.0.0.1:{listening[1]}/translate",
                               json={"q": "Hello world.", "source": "en", "target": "fr"}, timeout=60)
        cli = subprocess.run([*DRAGOMAN, "translate", "--model", "tiny", "--from", "eng_Latn", "--to", "fra_Latn",
                              "--device", "cpu"], input="Hello world.\n", capture_output=True, text=True, check=True)
        assert answer.status_code == 200 and answer.json()["translatedText"] == cli.stdout[:-1]
        assert any(paths.weights_cache.iterdir())
    finally:
        server.send_signal(signal.SIGTERM)
        _, rest = server.communicate(timeout=60)
    assert server.returncode == 0, rest  # stopped as asked


def test_a_port_in_use_is_one_line(tiny_checkpoint):
    with listening_socket("127.0.0.1", 0) as taken:
        port = taken.getsockname()[1]
        run = subprocess.run([*DRAGOMAN, "serve", "--model", str(tiny_checkpoint), "--port", str(port)],
                             capture_output=True, text=True)
    assert run.returncode == 1
    assert run.stderr == f"dragoman: error: cannot listen on 127.0.0.1:{port}: Address already in use\n"
