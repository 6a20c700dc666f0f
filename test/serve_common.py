"""Set-up shared by the `pitrain serve` tests: a small model trained on Fashion-MNIST (Debian's
dataset-fashion-mnist, installed by quickstart.sh), and a server started on a free port."""
import atexit
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request

PITRAIN = os.environ.get("PITRAIN") or sys.exit("set PITRAIN to the pitrain binary")
FASHION = "/usr/share/datasets/fashion-mnist"
SOURCE = os.environ.get("PITRAIN_SOURCE", os.path.join(os.path.dirname(__file__), ".."))


def skip(why):
    print("SKIP: " + why)
    sys.exit(77)


def work_dir(prefix):
    """A temporary folder, removed at exit."""
    path = tempfile.mkdtemp(prefix=prefix)
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


def run(*args):
    return subprocess.run([PITRAIN, *args], check=True, capture_output=True, text=True, stdin=subprocess.DEVNULL).stdout


def trained_model(work):
    """Prepares Fashion-MNIST and trains an mlp for 60 steps: a model that guesses, in seconds.
    Returns (checkpoint, dataset, log CSV)."""
    if not os.path.isdir(FASHION):
        skip(f"no {FASHION} (Debian's dataset-fashion-mnist, installed by quickstart.sh)")
    data, model, log = (os.path.join(work, name) for name in ("fm.h5", "m.h5", "log.csv"))
    run("prepare", "--idx", FASHION, "--classes", os.path.join(SOURCE, "datasets/fashion-mnist.txt"), "--out", data)
    run("train", "--data", data, "--model", "mlp", "--epochs", "2", "--steps-per-epoch", "30", "--threads", "1",
        "--checkpoint", model, "--log", log)
    return model, data, log


class Server:
    """`pitrain serve` on a free port of 127.0.0.1, stopped on exit."""

    def __init__(self, *args):
        self.proc = subprocess.Popen([PITRAIN, "serve", "--port", "0", *args], stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True)
        line = self.proc.stdout.readline()
        found = re.search(r"http://([\d.]+|\[[0-9a-f:.]*\]):(\d+)/", line)
        if not found:
            self.proc.kill()
            raise SystemExit("serve did not start: " + line + self.proc.stdout.read())
        self.host, self.port = found.group(1), int(found.group(2))
        self.url = f"http://{self.host}:{self.port}"

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        alive = self.proc.poll() is None
        self.proc.terminate()
        self.proc.wait(timeout=10)
        if not alive:
            raise SystemExit(f"the server died (exit {self.proc.returncode})")

    def request(self, path, body=None, method=None, timeout=10, headers=None):
        """(status, headers, parsed JSON or text) of one request. A body goes as JSON, with the
        Content-Type the server requires of a POST, unless headers says otherwise."""
        data = body if body is None or isinstance(body, bytes) else json.dumps(body).encode()
        sent = {"Content-Type": "application/json"} if data is not None else {}
        req = urllib.request.Request(self.url + path, data=data, method=method, headers={**sent, **(headers or {})})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as res:
                status, headers, text = res.status, res.headers, res.read().decode()
        except urllib.error.HTTPError as e:
            status, headers, text = e.code, e.headers, e.read().decode()
        is_json = headers.get("Content-Type", "").startswith("application/json")
        return status, headers, json.loads(text) if is_json else text

    def predict(self, pixels):
        status, _, answer = self.request("/api/predict", {"pixels": [int(v) for v in pixels]})
        assert status == 200, (status, answer)
        return answer["top"]
