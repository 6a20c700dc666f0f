"""`pitrain serve` against hostile clients of a shared WLAN (issue 75), on 127.0.0.1 only.

Each check is one way a client on the same network could stop the server, fill its memory or
read through a player's browser; the server must:
  - answer a normal client within 2 s while 64 slow clients (8 from each of 8 other loopback
    addresses) send a byte every 3 s, drop each slow client at the whole-request deadline (5 s),
    and close a ninth connection from one address at once;
  - refuse a 30 MB request line, 30 MB of 8 KB header lines and 100 headers, its peak memory
    (VmHWM of /proc/PID/status) growing less than 20 MB;
  - answer a Range request once and whole (200, not 206 parts), error replies included;
  - refuse a Host that is not its address and a foreign Origin (403 and a JSON error), a POST
    that is not application/json (415), and show no absolute path at /api/runs;
  - close the connection after an error: neither a chunked POST's body nor a request sent after
    a 404 on the same connection gets an answer;
  - answer /api/runs at once with a FIFO, a link to /dev/zero and a 6 MB file among the --log
    files, each named with its error.
The server runs under a 2 GB address-space limit, so a regression that reads /dev/zero ends in
the server's death, not the machine's."""
import os
import re
import resource
import socket
import threading
import time

from serve_common import Server, trained_model, work_dir

work = work_dir("pitrain-serve-hostile-")
model, _, log = trained_model(work)
fifo, zero, big = (os.path.join(work, name) for name in ("fifo.csv", "zero.csv", "big.csv"))
os.mkfifo(fifo)
os.symlink("/dev/zero", zero)
with open(big, "w") as f:
    f.write("epoch,val_accuracy,seconds\n" + "1,0.5,1.0\n" * 600000)
resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))  # inherited by the server started below


def connect(server, source="127.0.0.1", timeout=8):
    s = socket.socket()
    s.settimeout(timeout)
    s.bind((source, 0))
    s.connect((server.host, server.port))
    return s


def exchange(server, *parts, timeout=8):
    """Sends the parts on a new connection, 0.5 s apart (the server answers the first before the
    next arrives), and reads until the server closes it or `timeout` passes without a byte:
    (bytes received, whether the server closed the connection)."""
    with connect(server, timeout=timeout) as s:
        try:
            for i, part in enumerate(parts):
                time.sleep(0.5 if i else 0)
                s.sendall(part)
        except OSError:  # refused and closed before the server took it all
            pass
        got = b""
        try:
            while chunk := s.recv(65536):
                got += chunk
        except socket.timeout:
            return got, False
        except ConnectionResetError:
            pass
    return got, True


def closed_now(s):
    """Whether the server has closed the connection, without waiting (a socket with a timeout
    would wait for data whatever the flags)."""
    timeout = s.gettimeout()
    s.setblocking(False)
    try:
        return s.recv(1, socket.MSG_PEEK) == b""
    except BlockingIOError:
        return False
    except ConnectionResetError:
        return True
    finally:
        s.settimeout(timeout)


def peak_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        return int(next(line.split()[1] for line in f if line.startswith("VmHWM:")))


def slow_clients(server):
    """64 clients that send a byte every 3 s (half a request head, half a POST body) beside a
    normal client."""
    head = f"GET /api/classes HTTP/1.1\r\nHost: {server.name}\r\n\r\n".encode()
    post = (f"POST /api/predict HTTP/1.1\r\nHost: {server.name}\r\nContent-Type: application/json\r\n"
            "Content-Length: 3000\r\n\r\n{\"pixels\": [").encode()
    sources = [f"127.0.0.{i}" for i in range(2, 10)]  # 8 connections from each: the cap of one address
    clients = []  # [socket, what it sends, bytes sent]: a head from its first byte, a body after its head
    for i in range(64):
        data, sent = (head, 1) if i % 2 else (post + b"0" * 3000, len(post))
        clients.append([connect(server, sources[i // 8]), data, sent])
        clients[-1][0].sendall(data[:sent])
    stop = threading.Event()

    def trickle():
        while not stop.wait(3):
            for c in clients:
                try:
                    c[0].sendall(c[1][c[2]:c[2] + 1])
                    c[2] += 1
                except OSError:
                    pass
    thread = threading.Thread(target=trickle)
    thread.start()
    try:
        start = time.time()
        extra = connect(server, sources[0])
        time.sleep(1)
        assert closed_now(extra), "a ninth connection from one address was not closed at once"
        extra.close()
        assert not any(closed_now(c[0]) for c in clients), "a slow client under the cap was dropped within 1 s"
        slowest = 0
        while time.time() - start < 9:  # well past the 5 s deadline
            asked = time.time()
            status, _, _ = server.request("/api/classes", timeout=5)
            slowest = max(slowest, time.time() - asked)
            assert status == 200 and slowest < 2, f"a normal client waited {slowest:.1f} s (HTTP {status})"
            time.sleep(0.5)
        print(f"normal client answered within {slowest:.2f} s beside 64 slow clients")
        open_ones = sum(not closed_now(c[0]) for c in clients)
        assert open_ones == 0, f"{open_ones} slow clients still connected after {time.time() - start:.1f} s"
    finally:
        stop.set()
        thread.join(timeout=10)
        for c in clients:
            c[0].close()


def big_heads(server):
    """Request heads too long or with too many headers: refused, without buffering them."""
    before = peak_kb(server.proc.pid)
    host = f"Host: {server.name}\r\n".encode()
    for what, request in (
            ("a 30 MB request line", b"GET /" + b"a" * 30_000_000 + b" HTTP/1.1\r\n" + host + b"\r\n"),
            ("30 MB of 8 KB header lines", b"GET / HTTP/1.1\r\n" + host + (b"X-Fill: " + b"a" * 8000 + b"\r\n") * 3750 +
             b"\r\n")):
        answer, _ = exchange(server, request)
        # Refused: a 4xx answer, or the connection closed without one.
        assert answer == b"" or re.match(rb"HTTP/1\.[01] 4\d\d ", answer), (what, answer[:200])
        grown = (peak_kb(server.proc.pid) - before) / 1024
        assert grown < 20, f"{what}: the server's peak memory grew {grown:.0f} MB"
        print(f"{what}: refused ({answer[:12]!r}), peak memory +{grown:.1f} MB")
    answer, _ = exchange(server, b"GET / HTTP/1.1\r\n" + host + b"X-N: 1\r\n" * 100 + b"\r\n")
    assert answer.startswith(b"HTTP/1.1 431") and b'{"error":' in answer, answer[:300]


def ranges(server):
    """A Range of 2,700 parts: the answer is the page once."""
    page = server.request("/")[2].encode()
    parts = "bytes=" + ",".join(["0-"] * 2700)
    for path, status in (("/", b"200"), ("/nothing", b"404")):
        answer, _ = exchange(server, f"GET {path} HTTP/1.1\r\nHost: {server.name}\r\nRange: {parts}\r\n"
                             "Connection: close\r\n\r\n".encode())
        assert answer.startswith(b"HTTP/1.1 " + status) and len(answer) < len(page) + 2048, (path, len(answer), answer[:200])


def error_403(server, headers, what, path="/api/runs", body=None):
    status, _, answer = server.request(path, body, headers=headers)
    assert status == 403 and isinstance(answer, dict) and set(answer) == {"error"}, (what, status, answer)


def hosts_and_origins(server):
    """DNS rebinding and cross-site requests: only this server's names, only its own pages."""
    port = server.port
    for host in ("evil.example", f"evil.example:{port}", f"127.0.0.1:{port + 1 if port < 65535 else 1}",
                 "127.0.0.1", f"127.0.0.1.evil.example:{port}"):
        error_403(server, {"Host": host}, "Host " + host)
    answer, _ = exchange(server, b"GET /api/runs HTTP/1.0\r\n\r\n")
    assert answer.split(b" ")[1:2] == [b"403"] and b"columns" not in answer, ("no Host", answer)
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}"):
        status, _, answer = server.request("/api/classes", headers={"Host": host})
        assert status == 200, (host, status, answer)
    pixels = {"pixels": [0] * 784}
    for origin in ("http://evil.example", f"http://evil.example:{port}", "null", f"https://127.0.0.1:{port}"):
        error_403(server, {"Origin": origin}, "Origin " + origin)
        error_403(server, {"Origin": origin}, "POST, Origin " + origin, "/api/predict", pixels)
    status, _, answer = server.request("/api/predict", pixels, headers={"Origin": f"http://127.0.0.1:{port}"})
    assert status == 200 and "top" in answer, ("own Origin", status, answer)


def content_types(server):
    """A POST of a form, or text/plain, needs no CORS preflight: refused; JSON answered."""
    pixels = {"pixels": [0] * 784}
    for kind in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"):
        status, _, answer = server.request("/api/predict", pixels, headers={"Content-Type": kind})
        assert status == 415 and "application/json" in answer["error"], (kind, status, answer)
    status, _, answer = server.request("/api/predict", pixels, headers={"Content-Type": "application/json; charset=utf-8"})
    assert status == 200, (status, answer)


def runs_without_paths(server):
    """The --log files by name, each bad one named with its error, answered at once."""
    asked = time.time()
    status, _, answer = server.request("/api/runs", timeout=5)
    seconds = time.time() - asked
    assert status == 200 and seconds < 2, (status, seconds)
    assert work not in str(answer), f"/api/runs shows the folder {work}: {answer}"
    runs = {run["name"]: run for run in answer["runs"]}
    assert set(runs) == {"log.csv", "fifo.csv", "zero.csv", "big.csv"}, list(runs)
    assert "columns" in runs["log.csv"], runs["log.csv"]
    assert "not a regular file" in runs["fifo.csv"].get("error", ""), runs["fifo.csv"]
    assert "symbolic link" in runs["zero.csv"].get("error", ""), runs["zero.csv"]
    assert "over 4 MB" in runs["big.csv"].get("error", ""), runs["big.csv"]


def closed_after_errors(server):
    """After an error the server closes the connection: what the client sends after the answer (the
    body it still sends, or its next request) is never answered as a request."""
    inner = f"GET /api/classes HTTP/1.1\r\nHost: {server.name}\r\n\r\n".encode()
    post = f"POST /api/predict HTTP/1.1\r\nHost: {server.name}\r\nContent-Type: application/json\r\n".encode()
    for what, request, status in (
            ("a chunked POST", post + b"Transfer-Encoding: chunked\r\n\r\n", b"411"),
            ("a POST without Content-Length", post + b"\r\n", b"411"),
            ("a request after a 404", f"GET /nothing HTTP/1.1\r\nHost: {server.name}\r\n\r\n".encode(), b"404")):
        answer, closed = exchange(server, request, inner)
        assert answer.startswith(b"HTTP/1.1 " + status) and answer.count(b"HTTP/1.") == 1 and closed, (what, answer)


# big_heads first: its measure is the growth of the server's peak memory, before anything else raised it.
checks = [big_heads, hosts_and_origins, content_types, runs_without_paths, ranges, closed_after_errors, slow_clients]
failures = []
with Server("--model", model, "--log", log, "--log", fifo, "--log", zero, "--log", big) as server:
    server.name = f"127.0.0.1:{server.port}"
    for check in checks:
        try:
            check(server)
            print("ok: " + check.__name__)
        except Exception as e:  # every check runs: a report of all that fail
            failures.append(check.__name__)
            print(f"FAIL: {check.__name__}: {e!r}"[:2000])
    status, _, _ = server.request("/api/classes")
    assert status == 200, "the server stopped answering"
assert not failures, failures
print("serve hostile: ok")
