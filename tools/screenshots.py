"""Screenshots of every explorer page at 1366x768 and 390x844, into docs/screenshots/ (README's tour).

    .venv/bin/python tools/screenshots.py                 # its own server on var/screenshots
    .venv/bin/python tools/screenshots.py --base-url http://127.0.0.1:8000 --user demo --password demo

Without --base-url it starts the embedded PostgreSQL and Redis under ``var/screenshots`` (or
PMEM_DATA_DIR), migrates, loads the demo (``pmem_demo``) with one more user there, ``reviewer``,
the namespace's admin (so "Members & tokens" can be shown), starts gunicorn on a free port, logs
in as that user and stops it all at the end. Debian's Chromium is driven by Playwright. PNGs are palette-reduced to stay small.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "screenshots"
CHROMIUM = "/usr/bin/chromium"
WIDTHS = (("wide", 1366, 768), ("phone", 390, 844))
#: (file name, path; {ns} is the namespace), and "fit" where the graph's Fit is pressed (a
#: long history's summary). A new page: one more line.
PAGES: tuple[tuple[str, ...], ...] = (
    ("index", "/"),
    ("frontier", "/ns/{ns}/"),
    ("frontier-contested", "/ns/{ns}/?show=contested"),
    ("cell", "/ns/{ns}/cells/team_meeting_day/"),
    ("cell-retraction", "/ns/{ns}/cells/mug_1_location/"),
    ("read", "/ns/{ns}/read/?q=where+is+mug+1"),
    ("operations", "/ns/{ns}/operations/"),
    ("erase", "/ns/{ns}/cells/temp_access_code/erase/"),
    ("access", "/ns/{ns}/access/"),
    ("glossary", "/glossary/"),
    ("cell-details", "/ns/{ns}/cells/mug_1_location/#v2"),
    ("review", "/ns/{ns}/review/"),
    ("diff", "/ns/{ns}/cells/alice_home_city/diff/"),
    ("diff-contest", "/ns/{ns}/cells/team_meeting_day/diff/"),
    ("cell-long", "/ns/{ns}/cells/robot_position/"),
    ("cell-summary", "/ns/{ns}/cells/robot_position/", "fit"),
    ("404", "/ns/{ns}/cells/no_such_key/"),
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _manage(*args: str) -> None:
    subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, check=True)


@contextmanager
def own_server() -> Iterator[str]:
    """The stack on a data directory of its own, with the demo loaded; yields its URL."""
    os.environ.setdefault("PMEM_DATA_DIR", str(ROOT / "var" / "screenshots"))
    sys.path.insert(0, str(ROOT))
    from pmem_site import embedded

    embedded.start()
    server = None
    try:
        _manage("migrate", "--no-input", "-v", "0")
        _manage("collectstatic", "--no-input", "-v", "0")
        _manage("pmem_demo")
        _manage("shell", "-c", "from django.contrib.auth import get_user_model as g; "
                "from memory.models import Namespace; from memory.services import membership_set; "
                "u, new = g().objects.get_or_create(username='reviewer'); "
                "new and (u.set_password('reviewer') or u.save()); "
                "membership_set(namespace=Namespace.objects.get(name='demo'), user=u, role='admin')")
        # A long history (120 versions) for the graph's paging and its summary.
        _manage("shell", "-c", "from memory.models import Namespace, Version; "
                "from memory.services import operation_apply; "
                "ns = Namespace.objects.get(name='demo'); "
                "n = Version.objects.filter(cell__namespace=ns, cell__key='robot_position').count(); "
                "[operation_apply(namespace=ns, key='robot_position', op='accept', "
                "value=f'shelf {i}', actor='api:robot', explicit=True, reason='moved') "
                "for i in range(n, 120)]")
        port = _free_port()
        server = subprocess.Popen([sys.executable, "-m", "gunicorn", "pmem_site.wsgi:application",
                                   "--bind", f"127.0.0.1:{port}", "--workers", "2"], cwd=ROOT)
        url = f"http://127.0.0.1:{port}"
        for _ in range(100):
            try:
                urllib.request.urlopen(url + "/accounts/login/", timeout=2)
                break
            except OSError:
                time.sleep(0.2)
        yield url
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=20)
        embedded.stop()


def _shrink(path: Path) -> None:
    """Palette PNG: a screenshot of flat UI loses nothing visible and a good part of its size."""
    try:
        from PIL import Image
    except ImportError:
        return
    with Image.open(path) as image:
        small = image.convert("RGB").quantize(colors=128, method=Image.Quantize.MEDIANCUT)
    small.save(path, optimize=True)


def shoot(base_url: str, user: str, password: str, ns: str) -> list[Path]:
    from playwright.sync_api import sync_playwright

    OUT.mkdir(parents=True, exist_ok=True)
    saved = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM,
                                     args=["--headless", "--no-sandbox", "--disable-gpu"])
        for label, width, height in WIDTHS:
            context = browser.new_context(viewport={"width": width, "height": height},
                                          timezone_id="UTC", locale="en-US")
            page = context.new_page()
            page.goto(base_url + "/accounts/login/")
            path = OUT / f"login-{label}.png"
            page.screenshot(path=str(path))
            saved.append(path)
            page.fill("#id_username", user)
            page.fill("#id_password", password)
            page.click("button[type=submit]")
            page.wait_for_url(base_url + "/")
            for name, url, *action in PAGES:
                page.goto(base_url + url.format(ns=ns))
                page.wait_for_load_state("networkidle")
                if action == ["fit"]:
                    page.wait_for_function("() => window.pmemGraph && window.pmemGraph.renders")
                    page.click("#graph-fit")
                    page.wait_for_selector("#graph[data-mode='summary']")
                    page.locator("#graph").scroll_into_view_if_needed()
                if "#v" in url:  # a selected version: its details, where the page shows them
                    page.wait_for_function("() => document.getElementById('graph').dataset.selected")
                    page.locator("#node-details").scroll_into_view_if_needed()
                    page.wait_for_timeout(400)
                path = OUT / f"{name}-{label}.png"
                page.screenshot(path=str(path))
                saved.append(path)
            context.close()
        browser.close()
    for path in saved:
        _shrink(path)
    return saved


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--base-url", help="a running explorer (default: start one)")
    parser.add_argument("--user", help="default: demo, or reviewer on its own server")
    parser.add_argument("--password")
    parser.add_argument("--ns", default="demo")
    args = parser.parse_args()
    if args.base_url:
        saved = shoot(args.base_url.rstrip("/"), args.user or "demo", args.password or "demo",
                      args.ns)
    else:
        with own_server() as url:
            saved = shoot(url, args.user or "reviewer", args.password or "reviewer", args.ns)
    total = sum(p.stat().st_size for p in saved)
    print(f"{len(saved)} screenshots in {OUT.relative_to(ROOT)} ({total // 1024} KiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
