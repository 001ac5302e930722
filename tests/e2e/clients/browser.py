"""Checks the dashboards page in a real browser: headless Chromium driven through WebDriver
(Selenium, with Debian's chromium and chromium-driver; no driver or browser is ever downloaded).

Usage: browser.py --url http://127.0.0.1:PORT/ --expect FILE.json --screenshot OUT.png
                  [--timeout SECONDS] [--interval SECONDS] [--chromium PATH]
                  [--chromedriver PATH] [--driver-log FILE]
                  [--ca-cert CA.pem] [--authorization-file FILE]

--ca-cert makes Chromium trust that CA for the run, as a user who added it would: a throwaway
HOME whose NSS database holds it (certutil, from Debian's libnss3-tools), so that an https URL
is verified against it and nothing else is skipped. --authorization-file sends the file's content
as the Authorization header of every request (a file, so that no credential is on a command line).

The expectations file is one JSON object; every key is optional (the Rust end-to-end suite
writes it and owns the numbers):
  "banner": "live"|"stale"|"unknown"|null   #banner data-state (null: not checked)
  "hops": {NAME: STATE}                      span.hop[data-hop=NAME] data-state
  "panels": {ID: STATE}                      section#ID data-state
  "targets": {TARGET: {COL: N|"text"}|null}  the row tr[data-group=TARGET] of the
                                             #panel-rates-target table: td[data-col=COL] text as
                                             an integer (or the exact text, for a string); null:
                                             the target has no row
  "text_present": ["..."]                    each appears in the body's visible text (innerText)
  "no_confirmed_zero": true                  no .nothing[data-confirmed=true] element
  "alerts": {NAME: {"state": S, "delivery": D}}  some tr.alert[data-alert=NAME] has those
                                             data-state / data-delivery values

The page is loaded, and reloaded until every expectation holds or --timeout elapses. Whatever
the expectations, every load must also be safe, and one unsafe load fails the run at once: no
JavaScript dialog opened (a hostile value must not execute), no <script> element, no inline
event handler or javascript: URL, and no resource (link, script, img and other src elements, and
every request the browser's resource timing saw) outside the origin of --url.

Then the screenshot is written (full page, pass or fail) and one JSON line is printed:
  {"ok": bool, "failures": [...], "title": str|null, "checked": N, "attempts": N, "seconds": S}
where checked counts the checks of the last load. Exit 0 when ok, 1 when a check failed, 2 on a
usage or driver error (the reason on stderr, no JSON line).
"""

import argparse
import base64
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.parse
from collections.abc import Sequence
from typing import Literal, TypedDict

# With the driver path given explicitly Selenium Manager is skipped; offline mode makes sure that
# nothing it might still be asked for reaches out.
os.environ["SE_OFFLINE"] = "true"

from selenium import webdriver
from selenium.common.exceptions import (
    NoAlertPresentException,
    TimeoutException,
    UnexpectedAlertPresentException,
    WebDriverException,
)
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service

STATES = ("live", "stale", "unknown")
ALERT_VALUES = {
    "state": ("pending", "firing", "resolved"),
    "delivery": ("not_sent", "sending", "delivered", "undelivered"),
}
EXPECTATION_KEYS = (
    "banner",
    "hops",
    "panels",
    "targets",
    "text_present",
    "no_confirmed_zero",
    "alerts",
)
# Schemes that make no request.
INLINE_SCHEMES = ("data", "about")
# Chromium refuses to run as root without --no-sandbox; the tests run as root.
CHROMIUM_FLAGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--window-size=1400,2000",
    "--force-device-scale-factor=1",
    "--hide-scrollbars",
)
INTEGER = re.compile(r"-?[0-9]+")
PAGE_LOAD_LIMIT = 30.0
MAX_DIALOGS = 20

# Everything the checks read, taken in one synchronous script so that the page's own refresh
# cannot change it halfway. Names are compared in Python, never spliced into a selector.
SNAPSHOT_JS = r"""
const push = (map, key, value) => { (map[key] = map[key] || []).push(value); };
const snap = {
  url: location.href,
  title: document.title,
  banner: null,
  hops: {}, panels: {}, targets: {}, alerts: {},
  confirmed_zero: [], scripts: 0, handlers: [], script_urls: [], resources: [],
  status: null, text: document.body ? document.body.innerText : '',
};
const banner = document.getElementById('banner');
if (banner) snap.banner = banner.getAttribute('data-state');
for (const el of document.querySelectorAll('span.hop[data-hop]'))
  push(snap.hops, el.getAttribute('data-hop'), el.getAttribute('data-state'));
for (const el of document.querySelectorAll('section[id]'))
  push(snap.panels, el.id, el.getAttribute('data-state'));
const rates = document.getElementById('panel-rates-target');
if (rates) for (const tr of rates.querySelectorAll('tr[data-group]')) {
  const cells = {};
  for (const td of tr.querySelectorAll('td[data-col]'))
    cells[td.getAttribute('data-col')] = td.textContent.trim();
  push(snap.targets, tr.getAttribute('data-group'), cells);
}
for (const tr of document.querySelectorAll('tr.alert[data-alert]'))
  push(snap.alerts, tr.getAttribute('data-alert'),
       {state: tr.getAttribute('data-state'), delivery: tr.getAttribute('data-delivery')});
for (const el of document.querySelectorAll('.nothing[data-confirmed="true"]'))
  snap.confirmed_zero.push(el.textContent.trim().slice(0, 120));
snap.scripts = document.getElementsByTagName('script').length;
for (const el of document.querySelectorAll('*')) {
  for (const at of el.attributes) {
    const name = at.name.toLowerCase();
    if (name.startsWith('on')) snap.handlers.push(el.tagName.toLowerCase() + '[' + name + ']');
    if (['href', 'src', 'action', 'formaction', 'data', 'xlink:href'].includes(name)
        && /^\s*javascript:/i.test(at.value))
      snap.script_urls.push(el.tagName.toLowerCase() + '[' + name + ']');
  }
}
const resource = (selector, property) => {
  for (const el of document.querySelectorAll(selector))
    snap.resources.push(
      {what: el.tagName.toLowerCase() + '[' + property + ']', url: String(el[property])});
};
resource('link[href]', 'href');
resource(['script', 'img', 'iframe', 'frame', 'embed', 'source', 'video', 'audio', 'track', 'input']
         .map(tag => tag + '[src]').join(', '), 'src');
resource('object[data]', 'data');
for (const entry of performance.getEntriesByType('resource'))
  snap.resources.push({what: 'request (' + entry.initiatorType + ')', url: entry.name});
const navigation = performance.getEntriesByType('navigation')[0];
if (navigation && navigation.responseStatus) snap.status = navigation.responseStatus;
return snap;
"""


class Expectations(TypedDict, total=False):
    """The expectations file, once `load_expectations` has checked it."""

    banner: str | None
    hops: dict[str, str]
    panels: dict[str, str]
    targets: dict[str, dict[str, int | str] | None]
    text_present: list[str]
    no_confirmed_zero: bool
    alerts: dict[str, dict[str, str]]


class PageResource(TypedDict):
    """A resource of the page, as SNAPSHOT_JS reports it."""

    what: str
    url: str


class Snapshot(TypedDict):
    """What SNAPSHOT_JS returns; lists hold one entry per element of that name."""

    url: str
    title: str
    banner: str | None
    hops: dict[str, list[str | None]]
    panels: dict[str, list[str | None]]
    targets: dict[str, list[dict[str, str]]]
    alerts: dict[str, list[dict[str, str | None]]]
    confirmed_zero: list[str]
    scripts: int
    handlers: list[str]
    script_urls: list[str]
    resources: list[PageResource]
    status: int | None
    text: str


class Result(TypedDict):
    """The JSON line printed at the end."""

    ok: bool
    failures: list[str]
    title: str | None
    checked: int
    attempts: int
    seconds: float


# Scheme, lower-case host and port (the scheme's default when the URL has none).
Origin = tuple[str, str, int | None]


class UsageError(Exception):
    """Bad arguments or a bad expectations file."""


class DriverError(Exception):
    """The browser or its driver failed, not the page."""


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Check the dashboards page in headless Chromium through WebDriver."
    )
    parser.add_argument("--url", required=True, help="the page under test")
    parser.add_argument("--expect", required=True, help="expectations JSON file")
    parser.add_argument("--screenshot", required=True, help="PNG written at the end")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds (default 60)")
    parser.add_argument("--interval", type=float, default=1.0, help="seconds between loads")
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    parser.add_argument("--chromedriver", default="/usr/bin/chromedriver")
    parser.add_argument("--driver-log", help="write chromedriver's log to this file")
    parser.add_argument("--ca-cert", help="a PEM CA certificate Chromium trusts for the run")
    parser.add_argument(
        "--authorization-file", help="a file whose content is sent as the Authorization header"
    )
    args = parser.parse_args(argv)
    url = urllib.parse.urlsplit(args.url)
    if url.scheme not in ("http", "https") or not url.hostname:
        raise UsageError(f"--url must be an http(s) URL with a host, got {args.url!r}")
    if not args.timeout > 0:
        raise UsageError(f"--timeout must be positive, got {args.timeout}")
    if not args.interval >= 0:
        raise UsageError(f"--interval must not be negative, got {args.interval}")
    for name, path in (("--chromium", args.chromium), ("--chromedriver", args.chromedriver)):
        if not (os.path.isfile(path) and os.access(path, os.X_OK)):
            raise UsageError(f"{name} {path} is not an executable file")
    return args


def _require(condition: object, message: str) -> None:
    if not condition:
        raise UsageError(f"expectations: {message}")


def _state_map(
    spec: Expectations, key: Literal["hops", "panels"], allowed: tuple[str, ...]
) -> None:
    mapping = spec.get(key, {})
    _require(isinstance(mapping, dict), f"{key} must be an object")
    for name, state in mapping.items():
        _require(state in allowed, f"{key}.{name} must be one of {allowed}, got {state!r}")


def load_expectations(path: str) -> Expectations:
    try:
        with open(path, encoding="utf-8") as file:
            spec: Expectations = json.load(file)
    except (OSError, ValueError) as err:
        raise UsageError(f"cannot read expectations {path}: {err}") from err
    _require(isinstance(spec, dict), "the file must hold a JSON object")
    unknown = sorted(set(spec) - set(EXPECTATION_KEYS))
    _require(not unknown, f"unknown key(s) {unknown}; known: {list(EXPECTATION_KEYS)}")
    banner = spec.get("banner")
    _require(banner is None or banner in STATES, f"banner must be one of {STATES} or null")
    _state_map(spec, "hops", STATES)
    _state_map(spec, "panels", STATES)
    targets = spec.get("targets", {})
    _require(isinstance(targets, dict), "targets must be an object")
    for target, columns in targets.items():
        _require(
            columns is None or isinstance(columns, dict),
            f"targets.{target} must be an object or null",
        )
        for column, value in (columns or {}).items():
            _require(
                isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool)),
                f"targets.{target}.{column} must be an integer or a string, got {value!r}",
            )
    texts = spec.get("text_present", [])
    _require(
        isinstance(texts, list) and all(isinstance(text, str) for text in texts),
        "text_present must be a list of strings",
    )
    _require(
        isinstance(spec.get("no_confirmed_zero", False), bool), "no_confirmed_zero must be a bool"
    )
    alerts = spec.get("alerts", {})
    _require(isinstance(alerts, dict), "alerts must be an object")
    for name, want in alerts.items():
        _require(
            isinstance(want, dict) and want and set(want) <= set(ALERT_VALUES),
            f"alerts.{name} must be an object with state and/or delivery",
        )
        for key, value in want.items():
            _require(
                value in ALERT_VALUES[key],
                f"alerts.{name}.{key} must be one of {ALERT_VALUES[key]}, got {value!r}",
            )
    return spec


def origin_of(url: str) -> Origin:
    parts = urllib.parse.urlsplit(url)
    default_port = {"http": 80, "https": 443}.get(parts.scheme)
    try:
        port = parts.port or default_port
    except ValueError:
        port = None
    return (parts.scheme, (parts.hostname or "").lower(), port)


class Checks:
    """The outcome of one load: every check counted, the failures kept in order."""

    def __init__(self) -> None:
        self.checked = 0
        self.failures: list[str] = []
        # A failure of a property every load must have (no script ran, nothing foreign).
        self.unsafe = False
        self.title: str | None = None

    def check(self, ok: bool, failure: str) -> bool:
        self.checked += 1
        if not ok:
            self.failures.append(failure)
        return ok

    def safety(self, ok: bool, failure: str) -> bool:
        if not self.check(ok, failure):
            self.unsafe = True
        return ok


def expect_state(checks: Checks, what: str, found: Sequence[str | None], want: str) -> None:
    """`found` is the list of states of the elements named `what`."""
    if not found:
        checks.check(False, f"{what}: no such element (expected {want})")
    elif len(found) > 1:
        checks.check(False, f"{what}: {len(found)} elements (expected one, {want})")
    else:
        checks.check(found[0] == want, f"{what}: {found[0]}, expected {want}")


def expect_cell(
    checks: Checks, target: str, column: str, cells: dict[str, str], want: int | str
) -> None:
    what = f"target {target!r} {column}"
    if column not in cells:
        checks.check(False, f"{what}: no cell (columns: {sorted(cells)})")
        return
    text = cells[column]
    if isinstance(want, str):
        checks.check(text == want, f"{what}: {text!r}, expected {want!r}")
        return
    if not INTEGER.fullmatch(text):
        checks.check(False, f"{what}: {text!r} is not an integer (expected {want})")
        return
    checks.check(int(text) == want, f"{what}: {text}, expected {want}")


def evaluate(spec: Expectations, snap: Snapshot, origin: Origin, checks: Checks) -> None:
    checks.title = snap["title"]
    # Safety, on every load.
    checks.safety(snap["scripts"] == 0, f"the page has {snap['scripts']} <script> element(s)")
    checks.safety(
        not snap["handlers"], f"inline event handler(s) in the page: {snap['handlers'][:5]}"
    )
    checks.safety(
        not snap["script_urls"], f"javascript: URL(s) in the page: {snap['script_urls'][:5]}"
    )
    foreign = [
        f"{item['what']} {item['url']}"
        for item in snap["resources"]
        if urllib.parse.urlsplit(item["url"]).scheme not in INLINE_SCHEMES
        and origin_of(item["url"]) != origin
    ]
    checks.safety(not foreign, f"resource(s) outside the server under test: {foreign[:5]}")
    # The load itself.
    checks.check(
        origin_of(snap["url"]) == origin, f"the browser ended on {snap['url']}, another origin"
    )
    if snap["status"] is not None:
        checks.check(snap["status"] == 200, f"the page answered HTTP {snap['status']}")
    # Expectations.
    want_banner = spec.get("banner")
    if want_banner is not None:
        found = [snap["banner"]] if snap["banner"] is not None else []
        expect_state(checks, "#banner", found, want_banner)
    for hop, state in spec.get("hops", {}).items():
        expect_state(checks, f"hop {hop}", snap["hops"].get(hop, []), state)
    for panel, state in spec.get("panels", {}).items():
        expect_state(checks, f"panel #{panel}", snap["panels"].get(panel, []), state)
    for target, columns in spec.get("targets", {}).items():
        rows = snap["targets"].get(target, [])
        if columns is None:
            checks.check(not rows, f"target {target!r}: has a row, expected none")
            continue
        if not checks.check(
            len(rows) == 1,
            f"target {target!r}: {len(rows)} rows in #panel-rates-target (expected one)",
        ):
            continue
        for column, cell in columns.items():
            expect_cell(checks, target, column, rows[0], cell)
    for text in spec.get("text_present", []):
        checks.check(text in snap["text"], f"text not shown on the page: {text!r}")
    if spec.get("no_confirmed_zero"):
        checks.check(
            not snap["confirmed_zero"],
            f"a confirmed zero is shown: {snap['confirmed_zero'][:3]}",
        )
    for name, want in spec.get("alerts", {}).items():
        alerts = snap["alerts"].get(name, [])
        matching = [row for row in alerts if all(row[key] == value for key, value in want.items())]
        checks.check(bool(matching), f"alert {name}: expected {want}, rows: {alerts}")


def dismiss_dialogs(driver: webdriver.Chrome) -> list[str]:
    """The text of every JavaScript dialog open now, each dismissed."""
    texts: list[str] = []
    for _ in range(MAX_DIALOGS):
        try:
            alert = driver.switch_to.alert
            texts.append(alert.text)
            alert.dismiss()
        except NoAlertPresentException:
            break
    return texts


def check_dialogs(driver: webdriver.Chrome, checks: Checks) -> bool:
    texts = dismiss_dialogs(driver)
    if not checks.safety(not texts, f"a script ran: dialog(s) {texts}"):
        with contextlib.suppress(WebDriverException):
            checks.title = driver.title
    return not texts


def short(err: BaseException) -> str:
    """The first line of a WebDriver error, without the stack trace Chromium appends."""
    message: str = getattr(err, "msg", None) or str(err)
    return message.strip().splitlines()[0] if message.strip() else type(err).__name__


def alive(driver: webdriver.Chrome) -> bool:
    try:
        # Reading the URL is a round trip to the browser.
        _ = driver.current_url
        return True
    except UnexpectedAlertPresentException:
        return True
    except WebDriverException:
        return False


def load_once(
    driver: webdriver.Chrome, url: str, spec: Expectations, origin: Origin, remaining: float
) -> Checks:
    checks = Checks()
    driver.set_page_load_timeout(max(1.0, min(PAGE_LOAD_LIMIT, remaining)))
    try:
        driver.get(url)
    except UnexpectedAlertPresentException:
        pass  # reported below
    except TimeoutException:
        checks.check(False, f"{url} did not load within {min(PAGE_LOAD_LIMIT, remaining):.0f} s")
        check_dialogs(driver, checks)
        return checks
    except WebDriverException as err:
        if not alive(driver):
            raise DriverError(f"the browser stopped answering: {short(err)}") from err
        checks.check(False, f"could not load {url}: {short(err)}")
        return checks
    if not check_dialogs(driver, checks):
        return checks
    try:
        snap: Snapshot = driver.execute_script(SNAPSHOT_JS)
    except UnexpectedAlertPresentException:
        check_dialogs(driver, checks)
        return checks
    except WebDriverException as err:
        if not alive(driver):
            raise DriverError(f"the browser stopped answering: {short(err)}") from err
        checks.check(False, f"could not read the page: {short(err)}")
        return checks
    evaluate(spec, snap, origin, checks)
    return checks


def trusting_home(ca_cert: str, home: str) -> None:
    """Makes `home` a HOME whose NSS database (where Chromium on Linux reads the trust anchors a
    user added) trusts `ca_cert` to identify servers."""
    database = "sql:" + os.path.join(home, ".pki", "nssdb")
    os.makedirs(os.path.join(home, ".pki", "nssdb"))
    for command in (
        ["certutil", "-d", database, "-N", "--empty-password"],
        ["certutil", "-d", database, "-A", "-t", "C,,", "-n", "candor-test-ca", "-i", ca_cert],
    ):
        made = subprocess.run(command, capture_output=True, text=True, check=False)
        if made.returncode != 0:
            raise DriverError(f"{' '.join(command)} failed: {made.stderr.strip()}")


def start_driver(args: argparse.Namespace, home: str | None) -> webdriver.Chrome:
    options = Options()
    options.binary_location = args.chromium
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    # Leave dialogs open, so that a script that ran is seen rather than silently dismissed.
    options.unhandled_prompt_behavior = "ignore"
    env = dict(os.environ)
    if home is not None:
        env["HOME"] = home
    service = Service(
        executable_path=args.chromedriver,
        log_output=args.driver_log if args.driver_log else subprocess.DEVNULL,
        env=env,
    )
    try:
        driver = webdriver.Chrome(service=service, options=options)
    except WebDriverException as err:
        raise DriverError(
            f"could not start {args.chromium} through {args.chromedriver}: {short(err)}"
        ) from err
    if args.authorization_file:
        with open(args.authorization_file, encoding="utf-8") as file:
            authorization = file.read().strip()
        try:
            driver.execute_cdp_cmd("Network.enable", {})
            driver.execute_cdp_cmd(
                "Network.setExtraHTTPHeaders", {"headers": {"Authorization": authorization}}
            )
        except WebDriverException as err:
            driver.quit()
            raise DriverError(f"could not set the Authorization header: {short(err)}") from err
    return driver


def write_screenshot(driver: webdriver.Chrome, path: str) -> None:
    """The whole page, not only the window; the window if Chromium cannot do more."""
    try:
        metrics = driver.execute_cdp_cmd("Page.getLayoutMetrics", {})
        size = metrics["cssContentSize"]
        shot = driver.execute_cdp_cmd(
            "Page.captureScreenshot",
            {
                "format": "png",
                "captureBeyondViewport": True,
                "clip": {
                    "x": 0,
                    "y": 0,
                    "width": max(1, size["width"]),
                    "height": max(1, size["height"]),
                    "scale": 1,
                },
            },
        )
        png = base64.b64decode(shot["data"])
    except (WebDriverException, KeyError, TypeError) as err:
        print(f"browser.py: no full-page screenshot ({short(err)}), the window", file=sys.stderr)
        png = driver.get_screenshot_as_png()
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    partial = path + ".partial"
    with open(partial, "wb") as file:
        file.write(png)
    os.replace(partial, path)


def run(args: argparse.Namespace, spec: Expectations) -> Result:
    if args.ca_cert is None:
        return run_in(args, spec, None)
    with tempfile.TemporaryDirectory(prefix="candor-browser-home-") as home:
        trusting_home(args.ca_cert, home)
        return run_in(args, spec, home)


def run_in(args: argparse.Namespace, spec: Expectations, home: str | None) -> Result:
    origin = origin_of(args.url)
    driver = start_driver(args, home)
    # The time the page has starts once the browser is up: on a loaded machine Chromium alone can
    # take longer to start than a short --timeout, which would leave the page no time at all.
    started = time.monotonic()
    deadline = started + args.timeout
    try:
        attempts = 0
        reported: list[str] | None = None
        while True:
            attempts += 1
            checks = load_once(driver, args.url, spec, origin, deadline - time.monotonic())
            if checks.unsafe or not checks.failures:
                break
            if checks.failures != reported:
                reported = checks.failures
                print(
                    f"browser.py: load {attempts}: {len(checks.failures)} failure(s), first: "
                    f"{checks.failures[0]}",
                    file=sys.stderr,
                )
            if time.monotonic() + args.interval >= deadline:
                break
            time.sleep(args.interval)
        # A script may run after the checks read the page (a timer, a late error handler).
        check_dialogs(driver, checks)
        try:
            try:
                write_screenshot(driver, args.screenshot)
            except UnexpectedAlertPresentException:
                check_dialogs(driver, checks)
                write_screenshot(driver, args.screenshot)
        except (OSError, WebDriverException) as err:
            raise DriverError(f"could not write {args.screenshot}: {short(err)}") from err
        check_dialogs(driver, checks)
    finally:
        with contextlib.suppress(WebDriverException):
            driver.quit()
    return {
        "ok": not checks.failures,
        "failures": checks.failures,
        "title": checks.title,
        "checked": checks.checked,
        "attempts": attempts,
        "seconds": round(time.monotonic() - started, 2),
    }


def main(argv: list[str]) -> int:
    # A test that gives up on us sends SIGTERM: leave through `finally`, which stops the browser.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(2))
    try:
        args = parse_args(argv)
        spec = load_expectations(args.expect)
        result = run(args, spec)
    except UsageError as err:
        print(f"browser.py: {err}", file=sys.stderr)
        return 2
    except DriverError as err:
        print(f"browser.py: {err}", file=sys.stderr)
        return 2
    print(json.dumps(result))
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
