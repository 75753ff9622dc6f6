"""The dashboard in a real headless Chromium (Debian's chromium and chromium-driver, driven by
selenium) against a real coordinator process on SQLite: the token form, the task table, the tuning
curve growing live as results arrive, and a refused token sending the user back to the form.

The test plays the worker itself over the REST API, so it knows exactly how many trials were
measured. `make test` installs Chromium when it is missing; without it this test fails, never skips.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException, WebDriverException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import WebDriverWait

from tests.service.conftest import HARDWARE, HW, service_settings
from tests.service.onnx_models import encoded, mlp
from tests.service.processes import Coordinator, wait_until
from tuner.database import Database
from tuner.database.tokens import create_token

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
SPEC = {"op": "matmul", "params": {"M": 64, "N": 64, "K": 32}}
# The page polls every 2 s; a loaded machine may take a few polls.
PAGE_TIMEOUT = 30


@dataclass
class LiveService:
    url: str
    tokens: dict[str, str]  # role -> token
    http: httpx.Client

    def call(self, method: str, path: str, role: str, **kwargs) -> dict | list:
        headers = {"Authorization": f"Bearer {self.tokens[role]}"}
        reply = self.http.request(method, self.url + path, headers=headers, **kwargs)
        assert reply.is_success, (path, reply.status_code, reply.text)
        return reply.json()


@pytest.fixture
def service(tmp_path: Path) -> Iterator[LiveService]:
    settings = service_settings(f"sqlite:///{tmp_path / 'tuning.db'}")
    with Database.open(settings.database_url) as db:
        tokens = {
            role: create_token(db, role=role, name=f"dashboard {role}")[1]
            for role in ("client", "worker", "admin")
        }
    coordinator = Coordinator(settings, tmp_path).start()
    try:
        with httpx.Client(timeout=10) as http:
            yield LiveService(coordinator.url, tokens, http)
    finally:
        coordinator.stop()


@pytest.fixture
def browser(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[WebDriver]:
    """Headless Chromium with a fresh profile and nothing that reaches for the network."""
    missing = [str(p) for p in (CHROMIUM, CHROMEDRIVER) if not p.exists()]
    if missing:
        pytest.fail(
            f"{' and '.join(missing)} missing: run `make test`, which installs Debian's chromium and "
            "chromium-driver, or apt-get install chromium chromium-driver"
        )
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})  # the page's console, for errors
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--window-size=1100,800",
        f"--user-data-dir={tmp_path / 'chromium-profile'}",
    ):
        options.add_argument(flag)
    driver = webdriver.Chrome(
        service=Service(str(CHROMEDRIVER), log_output=str(tmp_path / "chromedriver.log")), options=options
    )
    try:
        yield driver
    finally:
        report = getattr(request.node, "report_call", None)
        if report is not None and report.failed:
            shot = tmp_path / "dashboard-failure.png"
            try:
                driver.save_screenshot(str(shot))
                print(f"screenshot of the page: {shot}")
            except WebDriverException as e:
                print(f"no screenshot: {e}")
        driver.quit()
        shutil.rmtree(tmp_path / "chromium-profile", ignore_errors=True)


def measure(service: LiveService, worker: int, n: int, first_secs: float) -> int:
    """Play the worker: lease `n` candidates (as the search loop queues them) and post a result for
    each, faster and faster so the best-so-far curve climbs. Returns how many were measured."""
    leased: list[dict] = []

    def lease() -> bool:
        body = {"max": n - len(leased)}
        leased.extend(service.call("POST", f"/v1/workers/{worker}/lease", "worker", json=body)["candidates"])
        return len(leased) == n

    wait_until(lease, 30, f"{n} candidates to lease")
    results = [
        {"candidate_id": c["id"], "status": "ok", "run_secs": [first_secs / (1 + i / 4)] * 3}
        for i, c in enumerate(leased)
    ]
    outcomes = service.call("POST", f"/v1/workers/{worker}/results", "worker", json={"results": results})
    # A would-be best is held until a second lease re-measures it: the worker leases it again.
    held = [r for r, o in zip(results, outcomes["outcomes"]) if o == "confirming"]
    assert len(held) + outcomes["outcomes"].count("accepted") == n
    if held:
        again = service.call("POST", f"/v1/workers/{worker}/lease", "worker", json={"max": len(held)})
        assert [c["id"] for c in again["candidates"]] == [r["candidate_id"] for r in held]
        confirmed = service.call("POST", f"/v1/workers/{worker}/results", "worker", json={"results": held})
        assert confirmed["outcomes"] == ["accepted"] * len(held)
    return n


# The page redraws at every poll: what it shows is read in one script, never from an element found
# before a redraw (a loaded machine redrew the curve between finding it and reading its points).
def curve_points(driver: WebDriver) -> int:
    script = "const c = document.querySelector('polyline#curve'); return c ? c.getAttribute('points') : ''"
    return len(driver.execute_script(script).split())


def row_text(driver: WebDriver, task_id: int) -> str:
    script = "const r = document.querySelector(arguments[0]); return r ? r.innerText : ''"
    return driver.execute_script(script, f'tr[data-task="{task_id}"]')


def texts(driver: WebDriver, selector: str) -> list[str]:
    """The text of every element `selector` matches, read at one moment."""
    script = "return [...document.querySelectorAll(arguments[0])].map((e) => e.textContent)"
    return driver.execute_script(script, selector)


def script_errors(driver: WebDriver) -> list[str]:
    """Errors the page's scripts raised (uncaught exceptions, console.error)."""
    return [
        e["message"]
        for e in driver.get_log("browser")
        if e["source"] == "javascript" or (e["source"] == "console-api" and e["level"] == "SEVERE")
    ]


def open_with_token(driver: WebDriver, url: str, token: str) -> None:
    driver.get(url + "/")
    wait = WebDriverWait(driver, PAGE_TIMEOUT)
    field = wait.until(
        lambda d: d.find_element(By.ID, "token") if d.find_element(By.ID, "login").is_displayed() else None
    )
    field.clear()
    field.send_keys(token)
    driver.find_element(By.CSS_SELECTOR, "#login button[type=submit]").click()


def test_the_dashboard_lists_tasks_and_draws_a_live_curve(service: LiveService, browser: WebDriver):
    hardware = HARDWARE
    registered = service.call("POST", "/v1/workers", "worker", json={"name": "bench-1", "hardware": hardware})
    worker = registered["id"]
    (kind,) = service.call("GET", "/v1/hardware", "client")
    service.call("POST", f"/v1/hardware/{kind['id']}/approve", "admin")
    task = service.call(
        "POST", "/v1/tasks", "client", json={"workload": SPEC, "trials": 12, "strategy": "random"}
    )
    measured = measure(service, worker, 5, 2e-3)

    open_with_token(browser, service.url, service.tokens["client"])
    wait = WebDriverWait(browser, PAGE_TIMEOUT)
    wait.until(lambda d: f"{measured} / 12" in row_text(d, task["id"]))
    row = row_text(browser, task["id"])
    assert "matmul K=32 M=64 N=64" in row and HW.key in row and "running" in row, row
    assert not browser.find_element(By.ID, "login").is_displayed()
    wait.until(lambda d: curve_points(d) == measured)

    # Live: more results arrive, and the next poll redraws the curve without a reload.
    measured += measure(service, worker, 3, 1e-3)
    wait.until(lambda d: curve_points(d) == measured)
    wait.until(lambda d: f"{measured} / 12" in row_text(d, task["id"]))
    best = service.call("GET", f"/v1/tasks/{task['id']}", "client")["best"]["gflops"]
    cells = texts(browser, f'tr[data-task="{task["id"]}"] td')
    assert float(cells[5]) == pytest.approx(best, abs=0.006)

    assert script_errors(browser) == []

    # Signing out forgets the token and shows the form again.
    browser.find_element(By.ID, "signout").click()
    wait.until(lambda d: d.find_element(By.ID, "login").is_displayed())
    assert browser.execute_script("return sessionStorage.getItem('tt-token')") is None


def test_a_refused_token_shows_an_error_and_the_form_again(service: LiveService, browser: WebDriver):
    open_with_token(browser, service.url, "tt_not_a_token")
    wait = WebDriverWait(browser, PAGE_TIMEOUT)
    wait.until(lambda d: "refused" in d.find_element(By.ID, "error").text)
    assert browser.find_element(By.ID, "login").is_displayed()
    assert not browser.find_element(By.ID, "main").is_displayed()
    assert browser.execute_script("return sessionStorage.getItem('tt-token')") is None
    # A worker's token is refused too: the dashboard reads tasks, which needs a client token.
    open_with_token(browser, service.url, service.tokens["worker"])
    wait.until(lambda d: "403" in d.find_element(By.ID, "error").text)
    assert browser.find_element(By.ID, "login").is_displayed()


def play_worker_until_done(service: LiveService, worker: int, model_id: int, secs: float = 1e-3) -> dict:
    """Measure whatever the coordinator queues for the model's layers until the model ends."""
    detail: dict = {}

    def ended() -> bool:
        nonlocal detail
        leased = service.call("POST", f"/v1/workers/{worker}/lease", "worker", json={"max": 8})["candidates"]
        if leased:
            results = [
                {"candidate_id": c["id"], "status": "ok", "run_secs": [secs * (1 + c["id"] / 50)] * 3}
                for c in leased
            ]
            service.call("POST", f"/v1/workers/{worker}/results", "worker", json={"results": results})
        detail = service.call("GET", f"/v1/models/{model_id}", "client")
        return detail["status"] not in ("pending", "running")

    # Alone this takes ~12 s. This client never heartbeats: its lease requests keep it alive. Under the
    # whole suite it once outlived 120 s here, and then 300 s: its leases had lapsed (it counted as
    # dead between a lease and its results), and one lost batch throttled it for 10 minutes.
    wait_until(ended, 300, f"model {model_id} to end")
    return detail


def test_the_model_page_shows_its_layers_their_curves_and_the_latency_curve(
    service: LiveService, browser: WebDriver
):
    worker = service.call("POST", "/v1/workers", "worker", json={"name": "bench-1", "hardware": HARDWARE})[
        "id"
    ]
    (kind,) = service.call("GET", "/v1/hardware", "client")
    service.call("POST", f"/v1/hardware/{kind['id']}/approve", "admin")
    body = {"onnx": encoded(mlp()), "trials": 20, "name": "mlp"}
    # The model is imported in a child process: seconds alone, more than the client's 10 s under
    # the whole suite's load.
    submitted = service.call("POST", "/v1/models", "client", json=body, timeout=120)
    model = play_worker_until_done(service, worker, submitted["id"])
    assert model["status"] == "done", model

    open_with_token(browser, service.url, service.tokens["client"])
    # The page redraws at every poll: what it shows is read in one script, never from an element
    # found before a redraw.
    wait = WebDriverWait(browser, PAGE_TIMEOUT, ignored_exceptions=[StaleElementReferenceException])
    row = f'tr[data-model="{submitted["id"]}"]'
    wait.until(lambda d: "20 / 20" in " ".join(texts(d, row)))
    assert "mlp" in texts(browser, f"{row} td") and "done" in texts(browser, f"{row} td")
    browser.find_element(By.CSS_SELECTOR, row).click()
    wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#layers tr")) == 2)
    known = [p for p in model["curve"] if p["estimated_secs"] is not None]
    points = "return document.getElementById('latency').getAttribute('points')"
    wait.until(lambda d: len(d.execute_script(points).split()) == len(known))
    for layer in model["layers"]:
        cells = texts(browser, f'#layers tr[data-task="{layer["task_id"]}"] td')
        assert float(cells[5]) == pytest.approx(layer["best_secs"] * 1e3, rel=1e-3)
        assert cells[7].startswith(f"{100 * layer['share']:.1f}%")
    # A layer's row draws its own tuning curve: one point per measured trial.
    second = model["layers"][1]
    wait.until(
        lambda d: d.find_element(By.CSS_SELECTOR, f'#layers tr[data-task="{second["task_id"]}"]')
    ).click()
    trials = len(service.call("GET", f"/v1/tasks/{second['task_id']}", "client")["curve"])
    wait.until(lambda d: curve_points(d) == trials)
    assert script_errors(browser) == []
    browser.find_element(By.ID, "back").click()
    wait.until(lambda d: d.find_element(By.ID, "tasks").is_displayed())
