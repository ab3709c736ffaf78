"""Explorer tests: namespaces filled through the services, users with each role, and a
headless Chromium (Debian's, driven by Playwright) for the browser tests."""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

# Playwright's sync API runs an event loop in the test thread; Django's ORM (used by the
# tests and the fixtures beside it) refuses to run there unless told it is safe, which it is:
# the loop only drives the browser.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

from tests.support.worker import celery_worker_proc  # noqa: E402,F401 - fixture

ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--no-first-run", "--disable-component-update", "--disable-sync"]
VIEWPORT = {"width": 1366, "height": 768}
PASSWORD = "pw-explorer"
_users = itertools.count(1)


@pytest.fixture
def demo_ns(make_namespace: Callable[..., Any]) -> Any:
    """A namespace with pmem_demo's histories: every operation shows somewhere."""
    from memory.management.commands.pmem_demo import load_histories

    namespace = make_namespace("explorer")
    load_histories(namespace)
    return namespace


@pytest.fixture
def make_user(db: None) -> Callable[..., Any]:
    """``make_user(role, namespace)``: a user with that role (None: no membership)."""
    from django.contrib.auth import get_user_model

    from memory.services import membership_set

    def make(role: str | None, namespace: Any = None, *, superuser: bool = False) -> Any:
        name = f"{role or 'outsider'}{os.getpid()}x{next(_users)}"
        user = get_user_model().objects.create_user(username=name, password=PASSWORD,
                                                    is_superuser=superuser)
        if role is not None and namespace is not None:
            membership_set(namespace=namespace, user=user, role=role)
        return user

    return make


# --- browser ---------------------------------------------------------------------------------


# Package scope: sync Playwright keeps an event loop running on this thread while it lives,
# and later packages run their own (anyio.run refuses to nest).
@pytest.fixture(scope="package")
def chromium() -> Iterator[Any]:
    if not os.access(CHROMIUM, os.X_OK):
        pytest.skip("Debian's chromium is not installed (make browser-deps)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


# Every page reports each Content-Security-Policy violation to the console, with a marker the
# fixture looks for (Chromium's own "Refused to ..." console messages are caught too).
CSP_MARK = "CSP violation:"
CSP_REPORTER = """
document.addEventListener("securitypolicyviolation", (e) => {
  console.error("MARK " + e.effectiveDirective + " blocked " + (e.blockedURI || "inline") +
                " at " + e.sourceFile + ":" + e.lineNumber + " sample=" + e.sample);
});
""".replace("MARK", CSP_MARK)


def is_csp_violation(text: str) -> bool:
    return text.startswith(CSP_MARK) or "Content Security Policy" in text


class Browsing:
    """One browser context for a test: a page, its console errors, CSP violations, login and
    screenshots. Every test that uses it fails on a script error, a console error, a CSP
    violation or an explorer page served without a Content-Security-Policy header (checked
    when the test ends), unless the test names the console error it causes on purpose
    (:meth:`expect_console_error`: a 400 it asks for, say)."""

    def __init__(self, browser: Any, base_url: str, **options: Any) -> None:
        self.base_url = base_url
        self.context = browser.new_context(**{"viewport": VIEWPORT, **options})
        self.context.add_init_script(CSP_REPORTER)
        self.page = self.context.new_page()
        self.page.set_default_timeout(15_000)
        # expect()'s own wait (5 s by default) as long as the page's: a loaded machine
        # answers an htmx action in more than 5 s now and then.
        from playwright.sync_api import expect
        expect.set_options(timeout=15_000)
        self.errors: list[str] = []
        self.csp_violations: list[str] = []
        self.expected: list[str] = []
        self.page.on("console", self._console)
        self.page.on("pageerror", lambda exc: self.errors.append(f"pageerror: {exc}"))
        self.page.on("dialog", lambda dialog: dialog.accept())  # hx-confirm: the user says yes
        self.page.on("response", self._response)

    def _console(self, message: Any) -> None:
        if message.type == "error":
            self.errors.append(message.text)
        if is_csp_violation(message.text):
            self.csp_violations.append(message.text)

    def _response(self, response: Any) -> None:
        # Every HTML page the server sends carries the policy (so a violation can be seen).
        if response.url.startswith(self.base_url) and \
                response.headers.get("content-type", "").startswith("text/html") and \
                "content-security-policy" not in response.headers:
            self.csp_violations.append(f"no Content-Security-Policy header on {response.url}")

    def assert_no_csp_violation(self) -> None:
        assert self.csp_violations == [], "CSP violations:\n" + "\n".join(self.csp_violations)

    def expect_console_error(self, fragment: str) -> None:
        """A console error with ``fragment`` is this test's doing (a refused request)."""
        self.expected.append(fragment)

    def unexpected_errors(self) -> list[str]:
        return [e for e in self.errors if not any(f in e for f in self.expected)
                and not is_csp_violation(e)]

    def assert_no_error(self) -> None:
        unexpected = self.unexpected_errors()
        assert unexpected == [], "script or console errors:\n" + "\n".join(unexpected)

    def url(self, path: str) -> str:
        return self.base_url + path

    def goto(self, path: str) -> Any:
        return self.page.goto(self.url(path))

    def login(self, user: Any) -> None:
        self.goto("/accounts/login/")
        self.page.fill("#id_username", user.username)
        self.page.fill("#id_password", PASSWORD)
        self.page.click("button[type=submit]")
        self.page.wait_for_url(self.url("/"))

    def shot(self, name: str) -> Path:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        path = ARTIFACTS / f"{name}.png"
        # caret="initial": Playwright hides the caret with a style attribute on each input,
        # which htmx's settle would copy into the next swap (a violation that is not the page's).
        self.page.screenshot(path=str(path), caret="initial")
        return path

    def csrf_token(self) -> str:
        return next(c["value"] for c in self.context.cookies() if c["name"] == "csrftoken")


@pytest.fixture
def browsing(chromium: Any, live_server: Any) -> Iterator[Browsing]:
    b = Browsing(chromium, live_server.url)
    try:
        yield b
        b.assert_no_csp_violation()
        b.assert_no_error()
    finally:
        b.context.close()
