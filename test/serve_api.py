"""`pitrain serve`'s API against `pitrain predict`, and every kind of bad request.

Held-out images (the val split) posted to /api/predict must get the top-3 classes and
probabilities that `pitrain predict --json` gives for the same images as .npy rows, to 1e-5,
and for one of them drawn dark on white in a PGM (which predict inverts back); and to 1e-5 the
probabilities of the checkpoint's mlp computed here with NumPy from its weights. Bad requests get a 4xx with one line of
JSON; slow and half-open clients are dropped at the 5 s request deadline while others are served
(serve_hostile.py tries the clients of a shared WLAN)."""
import json
import os
import socket
import threading
import time
import urllib.request

import h5py
import numpy as np

from serve_common import Server, run, trained_model, work_dir

work = work_dir("pitrain-serve-")
model, data, log = trained_model(work)
with h5py.File(data, "r") as f:
    images = f["/val/images"][:24]  # (24, 28, 28) uint8
np.save(os.path.join(work, "val.npy"), images)
darkest = int(np.argmin(images.mean(axis=(1, 2))))  # inverted, the lightest: predict inverts it back
pgm = os.path.join(work, "inverted.pgm")
with open(pgm, "wb") as f:
    f.write(b"P5\n28 28\n255\n" + (255 - images[darkest]).tobytes())


def predict_cli(path):
    """Top-3 of each image `pitrain predict --json` gives: [[(class, p), ...], ...]."""
    rows = []
    for line in run("predict", "--json", "--model", model, path).splitlines():
        p = json.loads(line)["probabilities"]
        rows.append(sorted(p.items(), key=lambda kv: -kv[1])[:3])
    return rows


TOLERANCE = 1e-5


def numpy_probabilities(pixels):
    """The mlp of the checkpoint (flatten dense(256,relu) dropout dense(10,softmax)), in float64."""
    with h5py.File(model, "r") as f:
        assert f.attrs["model_spec"] == "flatten dense(256,relu) dropout(0.2) dense(10,softmax)", f.attrs["model_spec"]
        # Keras' layout: /model_weights/LAYER/LAYER/WEIGHT:0
        w = {f"{layer}/{weight}": f[f"model_weights/{layer}/{layer}/{weight}:0"][()].astype(np.float64)
             for layer in ("dense", "dense_1") for weight in ("kernel", "bias")}
    x = np.asarray(pixels, dtype=np.float64).reshape(784) / 255
    logits = np.maximum(x @ w["dense/kernel"] + w["dense/bias"], 0) @ w["dense_1/kernel"] + w["dense_1/bias"]
    e = np.exp(logits - logits.max())
    return e / e.sum()


def exact(api_top, pixels, names, what):
    p = numpy_probabilities(pixels)
    assert [g["class"] for g in api_top] == [names[i] for i in np.argsort(-p)[:3]], (what, api_top, p)
    assert all(abs(g["p"] - p[names.index(g["class"])]) <= 1e-5 for g in api_top), (what, api_top, p)


def same(api_top, cli_top, what):
    assert len(api_top) == 3 and len(cli_top) == 3, (what, api_top, cli_top)
    assert [g["class"] for g in api_top] == [c for c, _ in cli_top], (what, api_top, cli_top)
    assert all(abs(g["p"] - p) <= TOLERANCE for g, (_, p) in zip(api_top, cli_top)), (what, api_top, cli_top)
    assert api_top[0]["p"] >= api_top[1]["p"] >= api_top[2]["p"], api_top


def error_line(status, headers, answer, expected, what):
    assert status == expected, (what, status, answer)
    assert headers.get("Content-Type", "").startswith("application/json"), (what, headers)
    assert isinstance(answer, dict) and answer.get("error") and "\n" not in json.dumps(answer), (what, answer)


def raw(server, data, wait=0.0, source="127.0.0.1"):
    """Sends bytes on a fresh connection from the source address, optionally waits, returns what
    comes back until the server closes it (and how long that took)."""
    start = time.time()
    with socket.create_connection((server.host, server.port), timeout=30, source_address=(source, 0)) as s:
        s.sendall(data)
        time.sleep(wait)
        got = b""
        while chunk := s.recv(65536):
            got += chunk
    return got.decode(errors="replace"), time.time() - start


live, missing = os.path.join(work, "live.csv"), os.path.join(work, "missing.csv")
with open(log) as f, open(live, "w") as out:
    out.write(f.read())

with Server("--model", model, "--log", live, "--log", missing) as server:
    status, _, classes = server.request("/api/classes")
    assert status == 200 and len(classes["classes"]) == 10 and classes["classes"][9] == "ankle boot", classes

    for i, cli_top in enumerate(predict_cli(os.path.join(work, "val.npy"))):
        api_top = server.predict(images[i].ravel())
        same(api_top, cli_top, f"val image {i}")
        exact(api_top, images[i], classes["classes"], f"val image {i}")
    same(server.predict(images[darkest].ravel()), predict_cli(pgm)[0], "dark-on-white PGM")
    # Posted pixels go through the same scaling as training: p is the softmax of the model.
    top = server.predict(images[1].ravel())
    assert 0 < top[0]["p"] <= 1 and top[0]["p"] > 0.1, top

    status, headers, _ = server.request("/api/predict", {"pixels": [0] * 784})
    assert status == 200 and headers.get("Server-Timing", "").startswith("predict;dur="), headers

    def runs():
        status, _, answer = server.request("/api/runs")
        assert status == 200, answer
        return answer["runs"]
    first, absent = runs()
    assert first["name"] == "live.csv" and first["columns"]["epoch"] == [1, 2], first
    assert first["columns"]["images"] == [30 * 32, 30 * 32] and len(first["columns"]["val_accuracy"]) == 2, first
    assert absent["name"] == "missing.csv" and "not written yet" in absent["error"], absent
    # A run still writing: a row counts once its line is whole.
    with open(live, "a") as f:
        f.write("3,0.5,0.8,0.6,0.79,1.5,0.1,9")
    assert runs()[0]["columns"]["epoch"] == [1, 2], "a half-written row was read"
    with open(live, "a") as f:
        f.write("60,2.5\n")
    assert runs()[0]["columns"]["images"] == [960, 960, 960], runs()[0]
    assert runs()[0]["columns"]["wall_seconds"][-1] == 2.5, runs()[0]
    for page in ("/", "/runs"):
        status, headers, html = server.request(page)
        assert status == 200 and headers["Content-Type"].startswith("text/html") and "getContext" in html, page
        assert "http://" not in html and "https://" not in html, f"{page} must fetch nothing from the internet"

    bad = [
        ("wrong length", "/api/predict", {"pixels": [0] * 783}, 400),
        ("too long", "/api/predict", {"pixels": [0] * 785}, 400),
        ("value over 255", "/api/predict", {"pixels": [0] * 783 + [256]}, 400),
        ("negative value", "/api/predict", {"pixels": [-1] + [0] * 783}, 400),
        ("fraction", "/api/predict", {"pixels": [0.5] + [0] * 783}, 400),
        ("string value", "/api/predict", {"pixels": ["7"] + [0] * 783}, 400),
        ("no pixels", "/api/predict", {"pixel": [0] * 784}, 400),
        ("not an object", "/api/predict", [0] * 784, 400),
        ("not JSON", "/api/predict", b"pixels=0,0,0", 400),
        ("empty body", "/api/predict", b"", 400),
        ("body over 64 KB", "/api/predict", b"[" + b"0," * 40000 + b"0]", 413),
        ("unknown path", "/api/nothing", None, 404),
        ("unknown page", "/index.html", None, 404),
        ("GET on predict", "/api/predict", None, 404),
        ("dots, encoded", "/%2e%2e/%2e%2e/etc/passwd", None, 400),
    ]
    for what, path, body, expected in bad:
        error_line(*server.request(path, body, method="POST" if body is not None else "GET"), expected, what)

    host = f"Host: 127.0.0.1:{server.port}\r\n".encode()
    # `..` as sent, not normalised by a client library.
    answer, _ = raw(server, b"GET /../../etc/passwd HTTP/1.1\r\n" + host + b"Connection: close\r\n\r\n")
    assert answer.startswith("HTTP/1.1 400") and '{"error":' in answer and "root:" not in answer, answer
    # Bodies whose size no Content-Length bounds, or that would inflate: refused before reading.
    for what, head, expected in (
        ("chunked", b"Transfer-Encoding: chunked\r\n", b"HTTP/1.1 411"),
        ("no Content-Length", b"", b"HTTP/1.1 411"),
        ("gzip", b"Content-Length: 20\r\nContent-Encoding: gzip\r\n", b"HTTP/1.1 415")):
        answer, _ = raw(server, b"POST /api/predict HTTP/1.1\r\n" + host + head + b"Connection: close\r\n\r\n" +
                        b"5\r\n{\"pix\r\n")
        assert answer.startswith(expected.decode()) and '{"error":' in answer, (what, answer)
    # A path that is not UTF-8 once decoded: a 404 like any other, and the server lives on.
    answer, _ = raw(server, b"GET /%FF HTTP/1.1\r\n" + host + b"Connection: close\r\n\r\n")
    assert answer.startswith("HTTP/1.1 404") and "no such page: /\ufffd" in answer, answer
    # A body that never comes, and clients that connect and say nothing: each dropped at the
    # request deadline (5 s); meanwhile the server answers. Eight from each of two addresses other
    # than the one asking: eight is what one address may hold open.
    slow = [b"POST /api/predict HTTP/1.1\r\n" + host + b"Content-Type: application/json\r\nContent-Length: 3000\r\n\r\n"
            b"{\"pixels\": [", b""]
    results = []

    def stalled(sent, source):
        # An exception here would otherwise end the thread with nothing recorded, unchecked.
        try:
            results.append((sent, *raw(server, sent, source=source)))
        except Exception as e:
            results.append((sent, repr(e), None))

    threads = [threading.Thread(target=stalled, args=(d, f"127.0.0.{2 + i % 2}")) for i, d in enumerate(slow * 8)]
    for t in threads:
        t.start()
    time.sleep(0.5)
    start = time.time()
    status, _, answer = server.request("/api/classes", timeout=15)
    seconds = time.time() - start
    assert status == 200 and seconds < 3, (answer, seconds)
    print(f"answered in {seconds:.2f} s beside {len(threads)} stalled clients")
    for t in threads:
        t.join(timeout=30)
        assert not t.is_alive(), "a stalled client was never dropped"
    assert len(results) == len(threads), f"{len(threads) - len(results)} stalled clients recorded nothing"
    for sent, answer, seconds in results:
        assert seconds is not None and 4 <= seconds <= 12, (sent, answer, seconds)
        assert answer == "" or answer.startswith("HTTP/1.1 4"), (sent, answer)
    # After all that, still the same answers.
    same(server.predict(images[2].ravel()), predict_cli(os.path.join(work, "val.npy"))[2], "after the bad requests")

# --host :: listens on every address: IPv4 clients reach it as well as IPv6 ones.
with Server("--model", model, "--host", "::") as server:
    for host in ["127.0.0.1"] + (["[::1]"] if socket.has_ipv6 and os.path.exists("/proc/net/if_inet6") else []):
        with urllib.request.urlopen(f"http://{host}:{server.port}/api/classes", timeout=10) as res:
            assert res.status == 200, (host, res.status)
        print(f"ok: --host :: answers on {host}")
print("serve API: ok")
