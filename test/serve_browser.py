"""The play page in a real browser: headless Chromium draws a circle and a house with pointer
events, the guesses appear while drawing and after each stroke, the 28x28 preview is the image
the page posted, centred and scaled as Quick Draw's bitmaps, and the server gives the same answer
for those pixels. Saves a screenshot ($PITRAIN_SCREENSHOT, else in the work folder; the README's
docs/serve.png). Skipped (77) without chromium, chromium-driver and python3-selenium."""
import math
import os
import shutil
import time

from serve_common import Server, skip, trained_model, work_dir

try:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
except ImportError:
    skip("no python3-selenium (quickstart.sh installs chromium, chromium-driver and python3-selenium)")
for program in ("chromium", "chromedriver"):
    if not shutil.which(program):
        skip(f"no {program} (quickstart.sh installs chromium, chromium-driver and python3-selenium)")

work = work_dir("pitrain-browser-")
# PITRAIN_SERVE_MODEL: play against that checkpoint instead (docs/serve.png shows a Quick Draw model).
model, log = (os.environ["PITRAIN_SERVE_MODEL"], None) if "PITRAIN_SERVE_MODEL" in os.environ else trained_model(work)[::2]
screenshot = os.environ.get("PITRAIN_SCREENSHOT") or os.path.join(work, "serve.png")

options = webdriver.ChromeOptions()
options.binary_location = shutil.which("chromium")
for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=900,720"):
    options.add_argument(arg)
service = Service(executable_path=shutil.which("chromedriver"))


def wait_for(what, check, seconds=20):
    end = time.time() + seconds
    while time.time() < end:
        if result := check():
            return result
        time.sleep(0.1)
    raise AssertionError("timed out waiting for " + what)


def stroke(browser, pad, points):
    """One stroke through points given in [0, 1] of the pad (pointerdown, moves, pointerup)."""
    size = pad.size["width"]
    at = [(round((x - 0.5) * size), round((y - 0.5) * size)) for x, y in points]  # from the centre
    actions = ActionChains(browser, duration=40)
    actions.move_to_element_with_offset(pad, *at[0]).click_and_hold()
    for (x0, y0), (x1, y1) in zip(at, at[1:]):
        actions.move_by_offset(x1 - x0, y1 - y0)
    actions.release().perform()


PREVIEW = ("const d = document.getElementById('seen').getContext('2d').getImageData(0, 0, 28, 28).data;"
           "const preview = Array.from({length: 784}, (_, i) => d[4 * i]);")


def preview(browser):
    """The preview canvas's 784 grey levels, as displayed."""
    return browser.execute_script(PREVIEW + "return preview;")


def check_drawing(server, browser, name, requests_before):
    """Once the page has answered the drawing and has no request in flight: what it shows."""
    shown = wait_for(name + "'s guesses", lambda: browser.execute_script(
        PREVIEW + "const p = window.pitrain;"
        "if (p.busy || p.requests <= arguments[0] || !p.top) return null;"
        "const names = Array.from(document.querySelectorAll('#guesses .guess .name'), e => e.textContent);"
        "return {pixels: p.pixels, top: p.top, requests: p.requests, names, preview};", requests_before))
    pixels, top = shown["pixels"], shown["top"]
    assert shown["names"] == [g["class"] for g in top] and len(top) == 3, (name, shown["names"], top)
    assert shown["preview"] == pixels, name + ": the preview is not the image that was posted"
    # The server answers those pixels as the page shows them.
    assert server.predict(pixels) == top, (name, top)
    # Quick Draw's framing: the longer side spans 26 pixels of 28 (25 or 26 above 64 in the
    # numpy_bitmap files: 472 and 28 of the first 500 apples), centred.
    ink = [(i % 28, i // 28) for i, v in enumerate(pixels) if v > 64]
    xs, ys = [x for x, _ in ink], [y for _, y in ink]
    span = max(max(xs) - min(xs), max(ys) - min(ys)) + 1
    assert 25 <= span <= 26, (name, span)
    assert abs((min(xs) + max(xs)) / 2 - 13.5) <= 1 and abs((min(ys) + max(ys)) / 2 - 13.5) <= 1, (name, xs, ys)
    assert sum(pixels) > 20 * 255, name
    return shown["requests"]


browser = webdriver.Chrome(options=options, service=service)
try:
    with Server("--model", model, *(["--log", log] if log else [])) as server:
        browser.get(server.url + "/")
        classes = server.request("/api/classes")[2]["classes"]
        wait_for("the class list", lambda: len(browser.find_elements(By.CSS_SELECTOR, "#classes span")) == len(classes))
        pad = browser.find_element(By.ID, "pad")

        # A circle, small and off-centre (the preview crops and centres it), in one slow stroke:
        # the page asks while drawing, not only at the end.
        circle = [(0.3 + 0.15 * math.cos(a / 40 * 2 * math.pi), 0.35 + 0.15 * math.sin(a / 40 * 2 * math.pi))
                  for a in range(41)]
        stroke(browser, pad, circle)
        requests = check_drawing(server, browser, "circle", 0)
        assert requests >= 2, f"{requests} requests for a 1.6 s stroke: none while drawing"

        browser.find_element(By.ID, "clear").click()
        assert browser.execute_script("return window.pitrain.pixels") is None and not any(preview(browser))
        house = [[(0.2, 0.5), (0.2, 0.9), (0.8, 0.9), (0.8, 0.5), (0.2, 0.5)],  # walls
                 [(0.15, 0.52), (0.5, 0.15), (0.85, 0.52)],                     # roof
                 [(0.45, 0.9), (0.45, 0.7), (0.57, 0.7), (0.57, 0.9)]]            # door
        for part in house:
            before = browser.execute_script("return window.pitrain.requests")
            stroke(browser, pad, part)
            requests = check_drawing(server, browser, "house", before)
        browser.save_screenshot(screenshot)
        print("screenshot: " + screenshot)

        # The game: a class of the model to draw, 20 s on the clock.
        browser.find_element(By.ID, "newword").click()
        word = browser.find_element(By.ID, "word").text
        assert word.startswith("Draw: ") and word[6:word.rindex(" (")] in classes and word.endswith("(20 s)"), word
        for part in house:
            before = browser.execute_script("return window.pitrain.requests")
            stroke(browser, pad, part)
            check_drawing(server, browser, "house in the game", before)

        if log:  # the runs page plots the log's two epochs
            browser.get(server.url + "/runs")
            wait_for("the runs' legend", lambda: "log.csv (2 epochs)" in browser.find_element(By.ID, "legend").text)
            inked = browser.execute_script(
                "return Array.from(document.querySelectorAll('#plots canvas'), c => {"
                "  const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;"
                "  let n = 0; for (let i = 0; i < d.length; i += 4) n += d[i] === 0x1f && d[i + 1] === 0x77; return n; });")
            assert len(inked) == 4 and all(n > 50 for n in inked), f"curve pixels in the 4 plots: {inked}"
finally:
    browser.quit()
print("serve browser: ok")
