r"""``prefbo serve --demo`` end to end in a real browser (headless Chromium).

Starts the demo server as its own process on a free loopback port, takes one
participant through the whole study with Selenium (the start page, clicks,
the key "2", undo, the progress bar, the thank-you section), then checks the
researcher's page lists them with every answer and, without a reload, a
favourite; unknown links show styled pages; every page carries the security
headers and the browser logs no error (a content-security-policy violation
included). Saves screenshots (``serve_start.png``, ``serve_participant.png``,
``serve_researcher.png``, ``serve_error.png``) into ``$PREFBO_TEST_OUTPUT``,
or the test's tmp_path.

Skipped when Chromium, chromedriver or Selenium is missing, unless
``PREFBO_REQUIRE_BROWSER=1``, which turns the skip into a failure.
"""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
ROOT = Path(__file__).resolve().parents[2]
TOTAL = 12  # the demo's answers_per_participant
Q = 2  # the demo's question size
TRACE = re.compile(r"Traceback \(most recent call last\)|File \"[^\"]+\", line \d+")
JOIN = re.compile(r"participants join at:\s+(http://\S+/join/\S+)")
RESEARCHER = re.compile(r"researcher's page:\s+(http://\S+/r/\S+)")


def _unavailable(reason: str) -> None:
    if os.environ.get("PREFBO_REQUIRE_BROWSER") == "1":
        pytest.fail(f"PREFBO_REQUIRE_BROWSER=1 but {reason}")
    pytest.skip(reason)


def _require_browser() -> None:
    for path, what in ((CHROMIUM, "Chromium"), (CHROMEDRIVER, "chromedriver")):
        if not os.access(path, os.X_OK):
            _unavailable(f"{what} is not installed at {path}")
    for module in ("selenium", "starlette", "uvicorn"):
        try:
            __import__(module)
        except ImportError:
            _unavailable(
                f"{module} is not installed (pip install selenium prefbo[serve])"
            )


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _http(url: str) -> tuple[int, str]:
    return _http_headers(url)[:2]


def _http_headers(url: str) -> tuple[int, str, dict[str, str]]:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status, r.read().decode(), _lower(r.headers)
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(), _lower(e.headers)


def _lower(headers) -> dict[str, str]:
    return {k.lower(): v for k, v in headers.items()}


class Server:
    r"""``prefbo serve --demo`` (or ``prefbo serve STUDY``) in its own
    process group."""

    def __init__(self, tmp_path: Path, study: Path | None = None) -> None:
        self.port = _free_port()
        self.log = tmp_path / "server.log"
        env = {
            **os.environ,
            "OMP_NUM_THREADS": "1",
            "PYTHONUNBUFFERED": "1",
            "TMPDIR": str(tmp_path),  # the demo's study folder goes here
        }
        what = ["--demo"] if study is None else [str(study)]
        cmd = [sys.executable, "-m", "prefbo.cli", "serve", *what]
        cmd += ["--port", str(self.port), "--db", str(tmp_path / "demo.db")]
        self._stderr = self.log.open("w")
        self.proc = subprocess.Popen(
            cmd,
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
            start_new_session=True,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.stdout: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)

    def links(self, timeout: float = 40.0) -> tuple[str, str]:
        r"""The join and researcher links it prints, once it answers HTTP."""
        deadline = time.monotonic() + timeout
        join = researcher = None
        while join is None or researcher is None:
            left = deadline - time.monotonic()
            if left <= 0 or self.proc.poll() is not None:
                raise AssertionError(f"the server printed no links:\n{self.output()}")
            try:
                line = self.lines.get(timeout=min(left, 0.5))
            except queue.Empty:
                continue
            self.stdout.append(line)
            join = join or (m.group(1) if (m := JOIN.search(line)) else None)
            researcher = researcher or (
                m.group(1) if (m := RESEARCHER.search(line)) else None
            )
        base = f"http://127.0.0.1:{self.port}"
        assert join.startswith(base) and researcher.startswith(base), self.stdout
        while True:  # the links are printed just before uvicorn listens
            try:
                if _http(base + "/healthz")[0] == 200:
                    return join, researcher
            except OSError:
                pass
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise AssertionError(f"the server does not answer:\n{self.output()}")
            time.sleep(0.1)

    def output(self) -> str:
        if not self._stderr.closed:
            self._stderr.flush()
        return "".join(self.stdout) + self.log.read_text()

    def stop(self) -> None:
        r"""Ask the server to stop as Ctrl-C does (it stops its workers), then
        kill whatever is left of its process group. Safe to call twice."""
        try:
            if self.proc.poll() is None:
                self.proc.send_signal(signal.SIGINT)
                try:
                    self.proc.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    pass
            try:  # the workers, and the server itself if it did not stop
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait(timeout=10)
        finally:
            if self.proc.stdout is not None:
                self.proc.stdout.close()
            if not self._stderr.closed:
                self._stderr.close()


def _driver(tmp_path: Path):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--window-size=1200,800",
        f"--user-data-dir={tmp_path / 'chromium-profile'}",
    ):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    service = Service(
        executable_path=CHROMEDRIVER, log_output=str(tmp_path / "driver.log")
    )
    driver = webdriver.Chrome(service=service, options=options)
    # a 1200 x 800 viewport (the window's frame takes some of the window)
    driver.set_window_size(1200, 800)
    inner = driver.execute_script("return [window.innerWidth, window.innerHeight]")
    driver.set_window_size(2400 - inner[0], 1600 - inner[1])
    driver.set_page_load_timeout(20)
    return driver


def _no_trace(driver) -> None:
    source = driver.page_source
    assert not TRACE.search(source), f"a stack trace on {driver.current_url}:\n{source}"


def _output_folder(tmp_path: Path) -> Path:
    folder = Path(os.environ.get("PREFBO_TEST_OUTPUT") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def test_a_participant_takes_the_demo_study_in_a_browser(tmp_path):
    _require_browser()
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    out = _output_folder(tmp_path)
    server = Server(tmp_path)
    driver = None
    try:
        driver = _driver(tmp_path)  # Chromium starts while the server does
        join, researcher = server.links()
        base = f"http://127.0.0.1:{server.port}"
        wait = WebDriverWait(driver, 15, poll_frequency=0.05)

        def count_text() -> str:
            return driver.find_element(By.ID, "count").text

        def wait_answered(n: int) -> None:
            want = f"{n} of {TOTAL} answered"
            try:
                wait.until(lambda d: count_text() == want)
            except TimeoutException:
                message = driver.find_element(By.ID, "message").text
                raise AssertionError(
                    f"waited for {want!r}, page shows {count_text()!r}, "
                    f"message {message!r}\n{server.output()}"
                ) from None
            assert driver.find_element(By.ID, "message").text == ""
            width = driver.execute_script(
                "return document.getElementById('bar').style.width"
            )
            assert float(width.rstrip("%")) == pytest.approx(
                100 * n / TOTAL, abs=1e-3
            ), width
            undo = driver.find_element(By.ID, "undo")
            assert undo.is_enabled() == (n > 0)

        def question_cards() -> list:
            r"""The current question's cards, once every image has loaded."""
            wait.until(
                lambda d: len(d.find_elements(By.CSS_SELECTOR, "button.option")) == Q
            )
            wait.until(
                lambda d: d.execute_script(
                    "const imgs = [...document.querySelectorAll('button.option img')];"
                    "return imgs.length === arguments[0]"
                    " && imgs.every((i) => i.complete && i.naturalWidth > 0);",
                    Q,
                )
            )
            cards = driver.find_elements(By.CSS_SELECTOR, "button.option")
            keys = [c.find_element(By.CSS_SELECTOR, ".key").text for c in cards]
            assert keys == [str(i + 1) for i in range(Q)]
            return cards

        def image_sources() -> list[str]:
            return [
                img.get_attribute("src")
                for img in driver.find_elements(By.CSS_SELECTOR, "button.option img")
            ]

        # -- the join link shows a start page; its button makes a participant
        # and sends them to their page
        status, _, headers = _http_headers(join)
        assert status == 200
        from prefbo.serve.security import HEADERS

        for name, value in HEADERS.items():
            assert headers.get(name.lower()) == value, (name, headers)
        driver.get(join)
        start = wait.until(lambda d: d.find_element(By.ID, "start"))
        assert "/join/" in driver.current_url
        driver.save_screenshot(str(out / "serve_start.png"))
        start.click()
        wait.until(lambda d: "/p/" in d.current_url)
        participant_url = driver.current_url
        assert participant_url.startswith(base + "/p/")
        assert driver.title == "Which colour do you like better?"
        wait_answered(0)
        cards = question_cards()
        assert driver.find_element(By.ID, "nopref").is_displayed()
        assert not driver.find_element(By.ID, "thanks").is_displayed()
        first = image_sources()

        # -- a click answers; undo takes it back and shows the same question
        cards[0].click()
        wait_answered(1)
        question_cards()
        assert image_sources() != first
        driver.find_element(By.ID, "undo").click()
        wait_answered(0)
        question_cards()
        assert image_sources() == first

        # -- the key "2" answers too, then clicks for the rest
        driver.find_element(By.TAG_NAME, "body").send_keys("2")
        wait_answered(1)
        for n in range(1, TOTAL):
            cards = question_cards()
            if n == 4:
                driver.save_screenshot(str(out / "serve_participant.png"))
            cards[n % Q].click()
            wait_answered(n + 1)
        wait.until(lambda d: d.find_element(By.ID, "thanks").is_displayed())
        assert driver.find_elements(By.CSS_SELECTOR, "button.option") == []
        assert not driver.find_element(By.ID, "nopref").is_displayed()
        _no_trace(driver)
        errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
        assert errors == [], errors

        # -- a reload of the finished page still says thanks
        driver.refresh()
        wait.until(lambda d: d.find_element(By.ID, "thanks").is_displayed())
        wait_answered(TOTAL)

        # -- the researcher's page lists them, and (within ~15 s) a favourite
        driver.get(researcher)
        assert driver.title.startswith("Researcher:")

        def snapshot(d):
            r"""The participant rows, the population's favourite and the
            page's text, read at once (the page replaces its content every
            few seconds, so elements found one by one can go stale)."""
            return d.execute_script(
                "const rows = [...document.querySelectorAll('#participants tbody tr')];"
                "const pop = document.getElementById('population');"
                "const text = (c) => c.innerText.trim();"
                "return {rows: rows.map((r) => [...r.cells].map(text)),"
                " population: pop ? pop.innerText : null,"
                " main: document.querySelector('main').innerText};"
            )

        def participant_row(d):
            rows = snapshot(d)["rows"]
            assert len(rows) == 1, rows
            return rows[0]

        cells = participant_row(driver)
        assert cells[1] == "participant 1" and cells[2] == str(TOTAL), cells
        assert cells[4] == "yes", cells
        deadline = time.monotonic() + 40  # the workers refit every few seconds

        def fitted_on_all(d):
            view = snapshot(d)
            population = view["population"] or ""
            return view["rows"][0][5] and f"after {TOTAL} answers" in population

        while not fitted_on_all(driver):
            assert time.monotonic() < deadline, (
                f"no favourite of all answers on the researcher's page after 40 s "
                f"(the page refreshes itself): {snapshot(driver)}\n"
                f"{server.output()}"
            )
            time.sleep(0.5)  # no reload: the page fetches itself again
        view = snapshot(driver)
        cells = view["rows"][0]
        assert re.search(r"hue = .*saturation = .*lightness = ", cells[5]), cells
        assert "after 12 answers" in view["population"], view["population"]
        assert f"{TOTAL} answers" in view["main"]
        # the plot counts answers (not joins and undos)
        assert f"{TOTAL} answers in" in driver.page_source
        _no_trace(driver)
        driver.execute_script(  # the participant's row in view, and what fits above
            "document.querySelector('#participants tbody tr')"
            ".scrollIntoView({block: 'end'})"
        )
        driver.save_screenshot(str(out / "serve_researcher.png"))

        errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
        assert errors == [], errors

        # -- unknown links: a styled page for people, JSON for the API
        status, text = _http(base + "/api/p/not-a-participant/question")
        assert status == 404 and json.loads(text) == {
            "error": "unknown participant link."
        }
        for path, error in (
            ("/p/not-a-participant", "Unknown participant link."),
            ("/join/not-the-code", "Unknown join link."),
            ("/r/not-the-token", "Not found."),
        ):
            status, text = _http(base + path)
            assert status == 404 and "<!doctype html>" in text, (path, status, text)
            driver.get(base + path)
            card = driver.find_element(By.ID, "error")
            assert "This link is not known" in card.text and error in card.text
            background = card.value_of_css_property("background-color")
            assert background == "rgba(255, 255, 255, 1)", background  # styled
            _no_trace(driver)
        driver.save_screenshot(str(out / "serve_error.png"))

        assert server.proc.poll() is None, server.output()
        server.stop()
        assert server.proc.returncode == 0, server.output()
        assert not TRACE.search(server.output()), server.output()
    finally:
        if driver is not None:
            driver.quit()
        server.stop()


#: The collaborative test: simulated participants answering through the API
#: meanwhile, and the answers each browser participant gives.
LOAD_PARTICIPANTS, BROWSER_ANSWERS = 12, 8


def _simulated_load(base: str, join_code: str, stop: threading.Event) -> list:
    r"""Participants who answer through the JSON API every 0.3-0.6 s until
    ``stop``, preferring the hue nearer 200 degrees; their threads."""
    import httpx

    def person(i: int) -> None:
        with httpx.Client(base_url=base, timeout=20) as client:
            joined = client.post(
                "/api/join", json={"join": join_code, "label": f"load {i}"}
            )
            token = joined.json()["token"]
            q = client.get(f"/api/p/{token}/question").json()
            while not stop.wait(0.3 + 0.3 * ((i * 7919) % 10) / 10):
                if q.get("done"):
                    return
                hues = [abs(float(o["hue"]) - 200) % 360 for o in q["options"]]
                choice = min(range(2), key=lambda k: min(hues[k], 360 - hues[k]))
                q = client.post(
                    f"/api/p/{token}/answer",
                    json={"question_id": q["question_id"], "choice": choice},
                ).json()

    threads = [
        threading.Thread(target=person, args=(i,), daemon=True)
        for i in range(LOAD_PARTICIPANTS)
    ]
    for t in threads:
        t.start()
    return threads


def test_three_browsers_answer_a_collaborative_study_under_load(tmp_path):
    # three people in real browsers take a collaborative study while
    # simulated participants answer through the API: joining once the model
    # is fitted, their questions are the model's, and the researcher's page
    # moves its favourites as the answers come
    _require_browser()
    import sqlite3

    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    from prefbo.serve.demo import DEMO_STUDY

    study = {
        **DEMO_STUDY,
        "answers_per_participant": 200,
        "model": {"kind": "collaborative", "initial_random": 4},
    }
    path = tmp_path / "study.json"
    path.write_text(json.dumps(study))
    server = Server(tmp_path, study=path)
    drivers: list = []
    stop = threading.Event()
    try:
        for i in range(3):
            (tmp_path / f"b{i}").mkdir()
            drivers.append(_driver(tmp_path / f"b{i}"))
        join, researcher = server.links()
        base = f"http://127.0.0.1:{server.port}"
        load = _simulated_load(base, join.rsplit("/join/", 1)[1], stop)

        def model_questions() -> int:
            con = sqlite3.connect(tmp_path / "demo.db")
            try:
                query = "SELECT COUNT(*) FROM questions WHERE origin = 'model'"
                return con.execute(query).fetchone()[0]
            finally:
                con.close()

        deadline = time.monotonic() + 60  # the worker starts and fits first
        while model_questions() == 0:
            assert time.monotonic() < deadline, server.output()
            time.sleep(0.5)
        for driver in drivers:
            driver.get(join)
            WebDriverWait(driver, 15).until(
                lambda d: d.find_element(By.ID, "start")
            ).click()
            WebDriverWait(driver, 15).until(lambda d: "/p/" in d.current_url)

        def answered(driver) -> int:
            return int(driver.find_element(By.ID, "count").text.split()[0])

        for n in range(BROWSER_ANSWERS):
            for driver in drivers:  # in turns, as people at one time
                wait = WebDriverWait(driver, 20, poll_frequency=0.05)
                wait.until(
                    lambda d, count=n: (
                        len(d.find_elements(By.CSS_SELECTOR, "button.option")) == Q
                        and answered(d) == count
                    )
                )
                driver.find_elements(By.CSS_SELECTOR, "button.option")[n % Q].click()
            time.sleep(0.8)  # about a person's pace for three of them
        for driver in drivers:
            WebDriverWait(driver, 20).until(
                lambda d: answered(d) == BROWSER_ANSWERS, "the last answer"
            )
            errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
            assert errors == [], errors

        # the researcher's page: the population's favourite is refitted on
        # more answers while they keep coming
        page = drivers[0]
        page.get(researcher)

        def population_answers() -> int | None:
            text = page.execute_script(
                "const p = document.getElementById('population');"
                "return p ? p.innerText : '';"
            )
            found = re.search(r"after (\d+) answers", text)
            return int(found.group(1)) if found else None

        deadline = time.monotonic() + 30
        seen = []
        while time.monotonic() < deadline and len(set(seen) - {None}) < 2:
            seen.append(population_answers())
            time.sleep(1)
        counts = sorted(set(seen) - {None})
        assert len(counts) >= 2, (seen, server.output())
        stop.set()
        for t in load:
            t.join(timeout=30)

        # the browser participants joined once the model had been fitted:
        # their questions came from it, the first ones included
        con = sqlite3.connect(tmp_path / "demo.db")
        rows = con.execute(
            "SELECT p.label, q.seq, q.origin FROM questions q JOIN participants p "
            "ON p.id = q.participant_id WHERE q.shown_at IS NOT NULL "
            "AND (p.label IS NULL OR p.label NOT LIKE 'load %') ORDER BY p.id, q.seq"
        ).fetchall()
        con.close()
        later = [origin for _, seq, origin in rows]
        assert len(later) == 3 * (BROWSER_ANSWERS + 1), rows
        assert later.count("model") >= len(later) - 2, rows
        assert server.proc.poll() is None, server.output()
        server.stop()
        assert not TRACE.search(server.output()), server.output()
    finally:
        stop.set()
        for driver in drivers:
            driver.quit()
        server.stop()
