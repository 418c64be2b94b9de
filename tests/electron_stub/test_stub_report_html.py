"""The HTML view of the report: one self-contained file (plotly's JS inlined, no http(s) script or
link), every plot present, readable back from a saved JSON report (``sidecar-stub report``); the
slow test loads it in headless Chromium and checks the plots drew something (pixels)."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from electron_stub import report
from electron_stub.cli import main
from sidecar.cli.report_html import render
from electron_stub.trace import Recorder

START = 1796025600.0  # 2026-11-30T08:00:00Z
PLOTS = ("queue", "distributions", "deliveries", "senders")


def _summary() -> dict:
    lines = [{"at": 0.0, "event": "login", "machine": "m1", "project": "golden", "tu": "g-1", "operator": "op-a"}]
    for i in range(6):
        at = 60.0 * i
        lines.append({"at": at, "event": "task.created", "task_id": f"t{i}", "type": "unanswered_message",
                      "project": "golden", "tu": "g-1", "ru": f"r{i}", "source": "socket", "deadline": at + 120,
                      "vip": None, "created_at": at})
        if i % 2:
            lines.append({"at": at + 200, "event": "task.updated", "task_id": f"t{i}", "overdue": True})
        lines.append({"at": at + 90 + 100 * (i % 2), "event": "task.closed", "task_id": f"t{i}", "tu": "g-1",
                      "reason": "answered"})
        lines.append({"at": at + 5, "event": "delivery", "target": "crm-hook", "status": "sent" if i % 3 else "failed"})
    lines.append({"at": 100.0, "event": "crash", "machines": ["m1"]})
    lines.append({"at": 120.0, "event": "sender.transition", "sender": "crm-hook", "from": "active",
                  "to": "cooldown", "code": 101, "note": "cooldown #1"})
    lines.append({"at": 400.0, "event": "sender.transition", "sender": "crm-hook", "from": "cooldown",
                  "to": "active", "code": 100, "note": ""})
    rec = Recorder(START)
    rec.lines.extend(lines)
    return report.summarize(rec, [], [], report.RunStats(scenario="synthetic", virtual_s=600.0))


def test_every_plot_present_and_self_contained(tmp_path):
    html = render(_summary())
    for name in PLOTS:
        assert f'data-plot="{name}"' in html, name
    assert not re.search(r"<(script|link|img)[^>]+(src|href)=[\"']?(https?:)?//", html, re.I)
    assert "Plotly" in html  # the library itself is inlined
    assert "Expectations and consistency" in html and "Fleet: recipe vs baseline" in html


def test_report_command_rereads_a_saved_json(tmp_path, capsys):
    saved = tmp_path / "report.json"
    report.write_json(_summary(), saved)
    out = tmp_path / "report.html"
    assert main(["report", str(saved), "--html", str(out)]) == 0
    assert 'data-plot="senders"' in out.read_text(encoding="utf-8")
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"scenario": "x"}))
    assert main(["report", str(bad), "--html", str(out)]) == 2
    assert "no 'series'" in capsys.readouterr().err


def test_templates_escape_the_scenario_name():
    s = _summary()
    s["scenario"] = "<script>alert(1)</script>"
    assert "<script>alert(1)</script>" not in render(s)


CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (Debian: apt-get install chromium); .ci/run installs it")
def test_chromium_draws_every_plot(tmp_path):
    """Headless Chromium (its own --screenshot, no driver library) loads the file: no console
    error in its log, plotly drew an SVG in every plot, and the screenshot is not blank (share of
    non-white pixels in each plot's band of the page)."""
    Image = pytest.importorskip("PIL.Image", reason="Pillow is needed for the pixel check")
    page = tmp_path / "report.html"
    page.write_text(render(_summary()), encoding="utf-8")
    shot = tmp_path / "shot.png"
    common = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
              "--window-size=1200,3000", "--virtual-time-budget=5000", "--enable-logging=stderr", "--v=0"]
    run = subprocess.run([*common, f"--screenshot={shot}", page.as_uri()], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    console = [ln for ln in run.stderr.splitlines() if "CONSOLE" in ln and ("rror" in ln or "Uncaught" in ln)]
    assert not console, console
    # the same page with a script that writes each plot's box (page px) into the DOM: same window size, same layout
    boxes_js = ("<script>window.addEventListener('load',()=>setTimeout(()=>{document.body.dataset.boxes=JSON.stringify("
                "[...document.querySelectorAll('.plot')].map(e=>{const r=e.getBoundingClientRect();"
                "return [e.dataset.plot,r.left,r.top+scrollY,r.width,r.height,!!e.querySelector('.main-svg')]}))},500))</script>")
    probe = tmp_path / "probe.html"
    probe.write_text(page.read_text(encoding="utf-8").replace("</body>", boxes_js + "</body>"), encoding="utf-8")
    dom = subprocess.run([*common, "--dump-dom", probe.as_uri()], capture_output=True, text=True, timeout=120).stdout
    found = re.search(r'data-boxes="([^"]*)"', dom)
    assert found, "the probe script did not run"
    boxes = json.loads(found.group(1).replace("&quot;", '"'))
    assert sorted({b[0] for b in boxes}) == sorted(PLOTS), boxes
    img = Image.open(shot).convert("RGB")
    for name, left, top, width, height, svg in boxes:
        assert svg, f"plotly drew no SVG in {name}"
        band = img.crop((int(left), int(top), int(left + width), int(top + height)))
        counts = sorted(band.getcolors(maxcolors=1 << 20) or [], reverse=True)
        background = sum(n for n, _ in counts[:2])  # the page's white and the plot area's fill
        ink = 1 - background / (band.size[0] * band.size[1])
        assert ink > 0.01, (name, ink)
