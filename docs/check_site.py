"""Load the built site in headless Chromium: every page renders without a console error, and
the search (mkdocs-material's lunr index, and its search box) finds `grad`, `threaded_map` and
`custom_vjp`; no code block is clipped, no page is wider than the window, no navigation
title shows markdown. Run by hand after `mkdocs build --strict -d site`:

    python docs/check_site.py [site] [--chromium /usr/bin/chromium]
    python docs/check_site.py site --screenshots shots --page / --page examples/lstm/

Stdlib only: the site is served on localhost by http.server, and the browser is driven through
the Chrome DevTools protocol over its websocket (a minimal client below). Exit status 1 when
any check fails.
"""
from __future__ import annotations

import argparse
import base64
import functools
import html
import http.server
import json
import os
import pathlib
import re
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request

QUERIES = ("grad", "threaded_map", "custom_vjp")
WINDOW = (1280, 900)          # a laptop's browser window, in CSS pixels
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                  "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--remote-debugging-port=0")


# -- a minimal websocket client (RFC 6455: text frames, client-masked) ------------------------

class WebSocket:
    def __init__(self, url: str):
        parts = urllib.parse.urlsplit(url)
        self.sock = socket.create_connection((parts.hostname, parts.port), timeout=30)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall((f"GET {parts.path} HTTP/1.1\r\nHost: {parts.netloc}\r\n"
                           "Upgrade: websocket\r\nConnection: Upgrade\r\n"
                           f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n")
                          .encode())
        response = b""
        while b"\r\n\r\n" not in response:
            response += self.sock.recv(4096)
        head, _, self.buffer = response.partition(b"\r\n\r\n")
        if b" 101 " not in head.split(b"\r\n")[0]:
            raise ConnectionError(head.decode(errors="replace"))

    def send(self, text: str) -> None:
        payload, mask = text.encode(), os.urandom(4)
        n = len(payload)
        if n < 126:
            header = struct.pack("!BB", 0x81, 0x80 | n)
        elif n < 1 << 16:
            header = struct.pack("!BBH", 0x81, 0x80 | 126, n)
        else:
            header = struct.pack("!BBQ", 0x81, 0x80 | 127, n)
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        self.sock.sendall(header + mask + masked)

    def _read(self, n: int) -> bytes:
        while len(self.buffer) < n:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("websocket closed")
            self.buffer += chunk
        data, self.buffer = self.buffer[:n], self.buffer[n:]
        return data

    def receive(self) -> str:
        message = b""
        while True:
            first, second = self._read(2)
            n = second & 0x7F
            if n == 126:
                n = struct.unpack("!H", self._read(2))[0]
            elif n == 127:
                n = struct.unpack("!Q", self._read(8))[0]
            payload = self._read(n)
            opcode = first & 0x0F
            if opcode == 0x8:
                raise ConnectionError("websocket closed by the browser")
            if opcode in (0x9, 0xA):          # ping/pong: not part of a message
                continue
            message += payload
            if first & 0x80:
                return message.decode()


class DevTools:
    """Commands and events of one page target."""

    def __init__(self, url: str):
        self.ws, self.next_id, self.events = WebSocket(url), 0, []

    def call(self, method: str, **params):
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            message = json.loads(self.ws.receive())
            if message.get("id") == self.next_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})
            self.events.append(message)

    def wait_for(self, method: str, timeout: float = 30.0):
        deadline = time.monotonic() + timeout
        self.ws.sock.settimeout(timeout)
        while time.monotonic() < deadline:
            for i, event in enumerate(self.events):
                if event.get("method") == method:
                    return self.events.pop(i)
            self.events.append(json.loads(self.ws.receive()))
        raise TimeoutError(method)

    def evaluate(self, expression: str):
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True,
                           awaitPromise=True)
        return result.get("result", {}).get("value")


# -- serving and browsing ---------------------------------------------------------------------

def serve(site: pathlib.Path):
    handler = functools.partial(_QuietHandler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def start_chromium(chromium: str, profile: str):
    process = subprocess.Popen([chromium, *CHROMIUM_FLAGS, f"--user-data-dir={profile}",
                                "about:blank"], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    port_file = pathlib.Path(profile) / "DevToolsActivePort"
    deadline = time.monotonic() + 60
    while not port_file.exists() or not port_file.read_text().strip():
        if time.monotonic() > deadline or process.poll() is not None:
            process.kill()
            raise RuntimeError("chromium did not start its DevTools endpoint")
        time.sleep(0.1)
    port = int(port_file.read_text().split()[0])
    targets = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list"))
    page = next(t for t in targets if t["type"] == "page")
    return process, page["webSocketDebuggerUrl"]


def console_errors(events) -> list[str]:
    """Console errors, uncaught exceptions and failed loads among the collected events."""
    errors = []
    for event in events:
        method, params = event.get("method"), event.get("params", {})
        if method == "Runtime.exceptionThrown":
            details = params["exceptionDetails"]
            errors.append(details.get("exception", {}).get("description") or details["text"])
        elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            errors.append(" ".join(str(a.get("value", a.get("description", "")))
                                   for a in params.get("args", [])))
        elif method == "Log.entryAdded" and params["entry"]["level"] == "error":
            errors.append(f"{params['entry']['text']} {params['entry'].get('url', '')}")
    return errors


def load(devtools: DevTools, url: str, settle: float = 0.3):
    devtools.events.clear()
    devtools.call("Page.navigate", url=url)
    devtools.wait_for("Page.loadEventFired")
    time.sleep(settle)                 # late console messages (the search worker starting)
    devtools.evaluate("1")             # drains events queued meanwhile
    title = devtools.evaluate("document.title")
    article = devtools.evaluate("document.querySelector('article') ? "
                                "document.querySelector('article').innerText.length : 0")
    return title, article, console_errors(devtools.events) + layout_problems(devtools)


# What a reader would see as broken, in a 1280-pixel window: a code block whose text runs past
# its right edge (clipped, or behind a scrollbar that shows only on hover), a page wider than
# the window, a navigation title with markdown in it. Notebook outputs are left alone: a
# printed array is as wide as numpy prints it.
_LAYOUT = """(() => {
    const problems = [];
    for (const pre of document.querySelectorAll('article pre:not(.nb-output pre)')) {
        const code = pre.querySelector('code') || pre;
        // text past the right edge, behind a scrollbar that shows only on hover, or none
        if (code.scrollWidth > code.clientWidth + 1 || pre.scrollWidth > pre.clientWidth + 1) {
            const lines = code.innerText.split('\\n');
            const longest = lines.reduce((a, b) => b.length > a.length ? b : a, '');
            problems.push('code block wider than its box: ' + longest.slice(0, 70));
        }
    }
    if (document.documentElement.scrollWidth > window.innerWidth + 1)
        problems.push('page wider than the window: ' + document.documentElement.scrollWidth);
    for (const link of document.querySelectorAll('.md-nav__link, .md-tabs__link')) {
        if (link.innerText.includes('`')) problems.push('navigation title with backticks: ' +
                                                        link.innerText.trim());
    }
    return [...new Set(problems)];
})()"""


def layout_problems(devtools: DevTools) -> list[str]:
    return devtools.evaluate(_LAYOUT)


def screenshot(devtools: DevTools, url: str, path: pathlib.Path) -> None:
    """A PNG of `url` in the checks' window (to look at, for what no check sees)."""
    load(devtools, url)
    data = devtools.call("Page.captureScreenshot", format="png")["data"]
    path.write_bytes(base64.b64decode(data))


def search_ui(devtools: DevTools, base: str, query: str, timeout: float = 20.0) -> list[str]:
    """Type `query` into the search box; the titles of the results it shows."""
    load(devtools, base)
    devtools.evaluate(f"""(() => {{
        const input = document.querySelector('input.md-search__input');
        input.focus(); input.value = {json.dumps(query)};
        input.dispatchEvent(new Event('input', {{bubbles: true}}));
        input.dispatchEvent(new KeyboardEvent('keyup', {{bubbles: true}}));
    }})()""")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        titles = devtools.evaluate(
            "[...document.querySelectorAll('.md-search-result__item h1, "
            ".md-search-result__item h2')].map(e => e.innerText)")
        if titles:
            return titles
        time.sleep(0.25)
    return []


def search_index(site: pathlib.Path, query: str) -> list[str]:
    """Pages of the lunr index whose text holds `query` as a word."""
    index = json.loads((site / "search" / "search_index.json").read_text(encoding="utf-8"))
    separator = index["config"]["separator"]
    found = []
    for doc in index["docs"]:
        text = html.unescape(re.sub(r"<[^>]+>", " ", f"{doc['title']} {doc['text']}"))
        words = {word.strip(".,:;!?()[]{}'\"`") for word in re.split(separator, text.lower())}
        if query.lower() in words:
            found.append(doc["location"])
    return found


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("site", nargs="?", default="site")
    parser.add_argument("--chromium", default=shutil.which("chromium") or "/usr/bin/chromium")
    parser.add_argument("--screenshots", metavar="DIR",
                        help="also save a PNG of each page given by --page into DIR")
    parser.add_argument("--page", action="append", default=[],
                        help="a page to screenshot, e.g. examples/lstm/ (repeatable)")
    options = parser.parse_args(argv)
    site = pathlib.Path(options.site).resolve()
    pages = sorted(p.relative_to(site) for p in site.rglob("index.html"))
    failures = 0

    for query in QUERIES:
        locations = search_index(site, query)
        print(f"search index: {query!r}: {len(locations)} sections, e.g. {locations[:3]}")
        failures += not locations

    server = serve(site)
    base = f"http://127.0.0.1:{server.server_address[1]}/"
    with tempfile.TemporaryDirectory() as profile:
        process, ws_url = start_chromium(options.chromium, profile)
        try:
            devtools = DevTools(ws_url)
            for domain in ("Page", "Runtime", "Log"):
                devtools.call(f"{domain}.enable")
            devtools.call("Emulation.setDeviceMetricsOverride", width=WINDOW[0],
                          height=WINDOW[1], deviceScaleFactor=1, mobile=False)
            for page in pages:
                url = base + ("" if str(page.parent) == "." else f"{page.parent.as_posix()}/")
                title, article, errors = load(devtools, url)
                ok = article > 0 and not errors
                failures += not ok
                print(f"{'ok ' if ok else 'FAIL'} {url.removeprefix(base) or '/'}: "
                      f"{title!r}, {article} characters" + "".join(f"\n     {e}" for e in errors))
            for query in QUERIES:
                titles = search_ui(devtools, base, query)
                print(f"search box: {query!r}: {len(titles)} results, first {titles[:3]}")
                failures += not titles
            if options.screenshots:
                folder = pathlib.Path(options.screenshots)
                folder.mkdir(parents=True, exist_ok=True)
                for page in options.page:
                    name = page.strip("/").replace("/", "_") or "index"
                    screenshot(devtools, base + page.lstrip("/"), folder / f"{name}.png")
                    print(f"screenshot {page} -> {folder / name}.png")
        finally:
            process.terminate()
            process.wait(timeout=30)
            server.shutdown()
    print("all checks passed" if not failures else f"{failures} checks failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
