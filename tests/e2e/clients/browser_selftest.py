"""Shows that browser.py can fail: it checks pages shaped like dashboards/src/page.rs output,
served from a temporary directory on a loopback port, one correct and several deliberately
broken (a wrong number, a confirmed zero, a hostile target rendered unescaped, a foreign image,
an inline event handler), and expects exit 0 for the first, 1 for the others, and a PNG
screenshot from every run.

Usage: browser_selftest.py [--keep DIR]   (DIR keeps the pages and screenshots)
Prints one line per case and then "N passed, N failed"; exits 1 when a case failed.
"""

import argparse
import functools
import html
import http.server
import json
import os
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable

HOSTILE = "<script>alert(1)</script>"
BROWSER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "browser.py")
PNG = b"\x89PNG\r\n\x1a\n"

ROWS = (
    ("t-ok", (20, 20, 0, 0, 0)),
    ("t-bad", (10, 4, 1, 2, 3)),
    (HOSTILE, (5, 5, 0, 0, 0)),
)


def page(
    name_html: Callable[[str], str] = html.escape, confirmed_zero: bool = False, extra: str = ""
) -> str:
    """A page with the structure page.rs renders; `name_html` renders a target name."""
    rows = ""
    for name, (calls, success, empty, partial, failures) in ROWS:
        rows += (
            f'<tr data-group="{html.escape(name)}">'
            f'<td><a href="/events?target=t&amp;since=15m">{name_html(name)}</a></td>'
            f'<td class="n" data-col="calls">{calls}</td>'
            f'<td class="n" data-col="success">{success}</td>'
            f'<td class="n" data-col="empty">{empty}</td>'
            f'<td class="n" data-col="partial">{partial}</td>'
            f'<td class="n" data-col="access_failure">{failures}</td>'
            f'<td class="n" data-col="rate">50.0 %</td>'
            f'<td class="n" data-col="terminal">0</td></tr>'
        )
    if confirmed_zero:
        nothing = '<p class="nothing" data-confirmed="true">No spikes.</p>'
    else:
        nothing = (
            '<p class="nothing" data-confirmed="false"><b>STALE</b>: nothing to show, and that '
            "is not a zero: the data does not cover the whole range.</p>"
        )
    return f"""<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Candor</title>
<meta http-equiv="refresh" content="15"><style>section.stale{{border:3px solid #b45309}}</style>
</head><body>
<header id="banner" class="live" data-state="live"><h1>Candor · pipeline LIVE</h1>
<div class="hops">
<span class="hop" data-hop="collector" data-state="live">collector <b>LIVE</b> (1 s ago)</span>
<span class="hop" data-hop="kafka" data-state="live">kafka <b>LIVE</b></span>
<span class="hop" data-hop="table" data-state="stale">table <b>STALE</b> since 2026-01-01T00:00:00Z
</span></div></header>
<nav>Range: <b>15m</b> <a href="/?range=1h">1h</a> | <a href="/events">Forensics</a></nav><main>
<section id="panel-rates-target" class="panel live" data-state="live"><h2>By target
<span class="badge live">LIVE</span></h2><p class="coverage">covers a to b</p>
<svg class="chart" width="540" height="160"><path d="M30,10 L100,50" fill="none" stroke="#2563eb">
<title>{html.escape(HOSTILE)}</title></path></svg>
<table class="groups"><tr><th>target</th><th>calls</th><th>success</th><th>empty</th>
<th>partial</th><th>access_failure</th><th>rate</th><th>terminal</th></tr>{rows}</table></section>
<section id="panel-spikes" class="panel stale" data-state="stale"><h2>Spikes</h2>{nothing}
</section>
<section id="panel-alerts" class="panel live" data-state="live"><h2>Alerts</h2><table id="alerts">
<tr class="alert" data-alert="CandorAccessFailureSpike" data-state="firing"
data-delivery="delivered">
<td>CandorAccessFailureSpike</td></tr>
<tr class="alert" data-alert="CandorWatchdog" data-state="firing" data-delivery="undelivered">
<td>CandorWatchdog</td></tr></table></section>{extra}</main></body></html>"""


EXPECT: dict[str, object] = {
    "banner": "live",
    "hops": {"collector": "live", "kafka": "live", "table": "stale"},
    "panels": {"panel-rates-target": "live", "panel-spikes": "stale"},
    "targets": {
        "t-ok": {"calls": 20, "success": 20, "access_failure": 0},
        "t-bad": {"calls": 10, "partial": 2, "access_failure": 3, "rate": "50.0 %"},
        HOSTILE: {"calls": 5},
        "t-absent": None,
    },
    "text_present": [HOSTILE],
    "no_confirmed_zero": True,
    "alerts": {
        "CandorAccessFailureSpike": {"state": "firing", "delivery": "delivered"},
        "CandorWatchdog": {"delivery": "undelivered"},
    },
}

# name, page, expectations, exit code, a failure that must be reported.
CASES: tuple[tuple[str, str, dict[str, object], int, str | None], ...] = (
    ("escaped", page(), EXPECT, 0, None),
    ("wrong-number", page(), {"targets": {"t-ok": {"calls": 21}}}, 1, "expected 21"),
    ("confirmed-zero", page(confirmed_zero=True), EXPECT, 1, "a confirmed zero is shown"),
    ("unescaped", page(name_html=lambda name: name), EXPECT, 1, "a script ran"),
    (
        "foreign-image",
        # Another origin on loopback (refused at once): nothing leaves the machine.
        page(extra='<img src="http://127.0.0.2:9/pixel.png" alt="">'),
        EXPECT,
        1,
        "outside the server under test",
    ),
    (
        "event-handler",
        page(extra='<img src="/missing.png" onerror="document.title=1" alt="">'),
        EXPECT,
        1,
        "inline event handler",
    ),
)


def serve(directory: str) -> http.server.ThreadingHTTPServer:
    handler = functools.partial(QuietHandler, directory=directory)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


def run_case(
    directory: str,
    port: int,
    name: str,
    body: str,
    expect: dict[str, object],
    want_code: int,
    want_failure: str | None,
) -> list[str]:
    with open(os.path.join(directory, f"{name}.html"), "w", encoding="utf-8") as file:
        file.write(body)
    expect_path = os.path.join(directory, f"{name}.json")
    with open(expect_path, "w", encoding="utf-8") as file:
        json.dump(expect, file)
    screenshot = os.path.join(directory, f"{name}.png")
    done = subprocess.run(
        [
            sys.executable,
            BROWSER,
            "--url",
            f"http://127.0.0.1:{port}/{name}.html",
            "--expect",
            expect_path,
            "--screenshot",
            screenshot,
            "--timeout",
            "3",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    problems: list[str] = []
    if done.returncode != want_code:
        problems.append(f"exit {done.returncode}, expected {want_code}: {done.stderr.strip()}")
    try:
        result = json.loads(done.stdout)
    except ValueError:
        result = None
        problems.append(f"no JSON line on stdout: {done.stdout!r}")
    if (
        result is not None
        and want_failure is not None
        and not any(want_failure in failure for failure in result["failures"])
    ):
        problems.append(f"no failure mentions {want_failure!r}: {result['failures']}")
    try:
        with open(screenshot, "rb") as file:
            if file.read(len(PNG)) != PNG:
                problems.append(f"{screenshot} is not a PNG")
    except OSError as err:
        problems.append(f"no screenshot: {err}")
    return problems


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", help="write the pages and screenshots here and keep them")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        directory = args.keep or scratch
        os.makedirs(directory, exist_ok=True)
        server = serve(directory)
        try:
            failed = 0
            for name, body, expect, code, failure in CASES:
                port = server.server_port
                problems = run_case(directory, port, name, body, expect, code, failure)
                failed += bool(problems)
                print(f"{'FAIL' if problems else 'ok  '} {name}", *problems, sep="\n    ")
        finally:
            server.shutdown()
    print(f"{len(CASES) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
