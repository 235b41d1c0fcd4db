"""The explorer as a person opens it: notebooks/00_explore.ipynb served by voila on 127.0.0.1,
driven by a real headless chromium (Debian's chromium and chromedriver, via selenium): the page
renders, a control changes, the output changes; a screenshot goes to reports/explorer/.

Needs /usr/bin/chromium and /usr/bin/chromedriver (``make browser-deps`` installs them with apt);
without them the test is skipped and says so. The kernel imports torch and transformers and
runs the notebook's cells, so the page takes tens of seconds: marked slow."""
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import Select, WebDriverWait

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = ROOT / "notebooks" / "00_explore.ipynb"
SHOT = ROOT / "reports" / "explorer" / "explorer.png"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
PAGE_S = 150  # the kernel's start and the notebook's cells, on a loaded 2-core machine

pytestmark = [pytest.mark.slow, pytest.mark.skipif(
    not (CHROMIUM and CHROMEDRIVER), reason="no chromium / chromedriver on PATH: `make browser-deps` installs them")]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    """voila serving the notebook (this tree first on the kernel's path); its URL."""
    port, log = _free_port(), tmp_path_factory.mktemp("voila") / "voila.log"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "voila", str(NOTEBOOK), "--no-browser", f"--port={port}",
                                 "--Voila.ip=127.0.0.1", "--ServerApp.root_dir=" + str(ROOT)],
                                stdout=out, stderr=subprocess.STDOUT, env=env, cwd=ROOT)
    url = f"http://127.0.0.1:{port}/"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:  # the port answers (GET / would already start the page's kernel)
                socket.create_connection(("127.0.0.1", port), timeout=2).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"voila did not start: {log.read_text()[-2000:]}")
                time.sleep(0.5)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()


@pytest.fixture(scope="module")
def browser():
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1500,2200"):
        opts.add_argument(arg)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    yield driver
    driver.quit()


def _control(driver, label: str):
    """The <select> or <input> of the ipywidget whose description is ``label``."""
    box = driver.find_element(By.XPATH, f"//label[normalize-space()='{label}']/..")
    return box.find_element(By.CSS_SELECTOR, "select, input")


def test_the_page_answers_a_changed_control(page, browser):
    browser.get(page)
    wait = WebDriverWait(browser, PAGE_S, ignored_exceptions=(StaleElementReferenceException,))
    wait.until(EC.presence_of_element_located((By.ID, "explorer-passes")))
    before = wait.until(lambda d: d.find_element(By.ID, "explorer-passes").text)
    assert "0.9.0" in wait.until(lambda d: d.find_element(By.CSS_SELECTOR, "h4").text)  # the default row
    Select(_control(browser, "release row / variant")).select_by_visible_text("shape-only")
    wait.until(lambda d: "shape-only" in d.find_element(By.CSS_SELECTOR, "h4").text)
    after = wait.until(lambda d: d.find_element(By.ID, "explorer-passes").text)  # redrawn: read again if stale
    assert after != before
    cells = after.split()  # the header (phase names), then the passes per phase
    assert all(c == "0" for c in cells[len(cells) // 2:]), after  # a shape-only row makes no HF pass
    assert "computed in" in wait.until(lambda d: d.find_element(By.ID, "explorer-elapsed").text)
    SHOT.parent.mkdir(parents=True, exist_ok=True)
    assert browser.save_screenshot(str(SHOT)) and SHOT.stat().st_size > 10_000
