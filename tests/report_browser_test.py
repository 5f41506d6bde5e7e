#!/usr/bin/env python3
"""`lmtrain report` in a real browser (Debian's chromium, headless), run by CTest as report.browser.

It trains a tiny model (12 steps, then resumed to 18: a resumed segment), fine-tunes it for 6 steps with
blocks.0 frozen, writes the fine-tune's report (drift from its --from, next-token bars) and the base run's,
opens both in chromium and checks:
- no console message at all (errors, CSP violations and uncaught exceptions all print there);
- the page's own problem counter is 0 and it finished drawing;
- the DOM holds the expected numbers of map points, curve samples per series, resume marks and table rows,
  each against an independent source: metrics.jsonl, `lmtrain inspect probs --json`, `lmtrain inspect
  drift --json` (the same pieces in the same order), the tensors of model.safetensors, forgetting.json;
- a screenshot is not blank: many distinct colours, a good share of non-white pixels;
- the page asks for nothing on the network, by the browser's own NetLog (and a leaky control page shows
  that the NetLog check does catch a request);
- the file is under 3 MB.
Exit 77 (CTest: skipped, the reason printed) when chromium is not installed or cannot start here.
Usage: report_browser_test.py LMTRAIN_BINARY TESTS_DATA_DIR [KEEP_DIR]
       report_browser_test.py --screenshot REPORT.html OUT.png [WIDTHxHEIGHT]   (README's picture, same browser)
"""
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib

import numpy as np

SKIP = 77
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--disable-default-apps", "--hide-scrollbars",
         "--enable-logging=stderr", "--v=0"]
failures = []


def check(ok, what):
    print(("ok:   " if ok else "FAIL: ") + what)
    if not ok:
        failures.append(what)


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300, **kw)
    if r.returncode != 0:
        print("command failed:", " ".join(cmd), "\n", r.stdout, r.stderr)
        sys.exit(1)
    return r.stdout


def browser(exe, url, workdir, extra):
    """Runs chromium on url; returns (stdout, console lines, URLs the page requested)."""
    net = os.path.join(workdir, "netlog.json")
    r = subprocess.run([exe] + FLAGS + ["--log-net-log=" + net] + extra + [url], capture_output=True, text=True,
                       timeout=180, cwd=workdir)
    console = [line for line in r.stderr.splitlines() if ":CONSOLE" in line]
    return r, console, page_requests(net)


def page_requests(netlog_path):
    """URLs of requests the page started (Chromium's own services have the initiator 'not an origin')."""
    if not os.path.exists(netlog_path):
        return ["(no NetLog written)"]
    with open(netlog_path) as f:
        text = f.read()
    if not text.rstrip().endswith("}"):  # a NetLog cut short at exit lacks its closing brackets
        text = text.rstrip().rstrip(",") + "]}"
    log = json.loads(text)
    start_job = log["constants"]["logEventTypes"]["URL_REQUEST_START_JOB"]
    urls = []
    for e in log["events"]:
        p = e.get("params", {})
        url = p.get("url") or ""
        if e["type"] == start_job and p.get("initiator") != "not an origin" and url:
            if not url.startswith(("file:", "data:")):
                urls.append(url)
    return urls


def png_pixels(path):
    """The RGB pixels of an 8-bit, non-interlaced RGB or RGBA PNG (what chromium writes) as an (H,W,3) array."""
    data = open(path, "rb").read()
    pos, idat = 8, b""
    while pos < len(data):
        n, kind = struct.unpack(">I", data[pos:pos + 4])[0], data[pos + 4:pos + 8]
        body = data[pos + 8:pos + 8 + n]
        pos += 12 + n
        if kind == b"IHDR":
            w, h, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert depth == 8 and colour in (2, 6) and interlace == 0, "unexpected PNG format"
        elif kind == b"IDAT":
            idat += body
    bpp = 3 if colour == 2 else 4
    raw = np.frombuffer(zlib.decompress(idat), dtype=np.uint8).reshape(h, 1 + w * bpp)
    out = np.zeros((h, w * bpp), dtype=np.uint8)
    prev = np.zeros(w * bpp, dtype=np.int32)
    for y in range(h):
        kind, line = raw[y, 0], raw[y, 1:].astype(np.int32)
        if kind == 1:
            line = np.cumsum(line.reshape(w, bpp), axis=0).reshape(-1) % 256
        elif kind == 2:
            line = (line + prev) % 256
        elif kind in (3, 4):
            cur = line.copy()
            for x in range(w * bpp):
                a = cur[x - bpp] if x >= bpp else 0
                b = prev[x]
                c = prev[x - bpp] if x >= bpp else 0
                if kind == 3:
                    pred = (a + b) // 2
                else:
                    p = a + b - c
                    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                    pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                cur[x] = (cur[x] + pred) % 256
            line = cur
        out[y] = line
        prev = line.astype(np.int32)
    return out.reshape(h, w, bpp)[:, :, :3]


def count(dom, needle):
    return dom.count(needle)


def samples(dom, name):
    marker = 'data-name="%s" data-samples="' % name
    at = dom.find(marker)
    return -1 if at < 0 else int(dom[at + len(marker):dom.index('"', at + len(marker))])


def table_rows(dom, table_id_or_class):
    at = dom.find(table_id_or_class)
    if at < 0:
        return -1
    body = dom[dom.index("<tbody>", at):dom.index("</tbody>", at)]
    return body.count("<tr>")


def metrics_counts(run_dir):
    rows = [json.loads(line) for line in open(os.path.join(run_dir, "metrics.jsonl"))]
    train = sum(r["kind"] == "train" for r in rows)
    periodic = sum(r["kind"] == "val" and not r["full"] for r in rows)
    whole = sum(r["kind"] == "val" and r["full"] for r in rows)
    return train, periodic, whole


def safetensors_names(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        return [k for k in json.loads(f.read(n)) if k != "__metadata__"]


def make_runs(lm, data, tmp):
    base_cfg, ft_cfg = os.path.join(tmp, "base.yaml"), os.path.join(tmp, "ft.yaml")
    with open(base_cfg, "w") as f:
        f.write(f"run: {{dir: {tmp}/base, seed: 1, threads: 1, blas_threads: 1}}\n"
                f"data: {{train: {data}/tiny_en.txt, val: {data}/tiny_en_val.txt}}\n"
                "tokenizer: {vocab_size: 96}\nmodel: {d_model: 32, n_layers: 2, n_heads: 2, max_seq_len: 32}\n"
                "train: {batch_size: 4, max_steps: 12, warmup_steps: 2, eval_every: 6, eval_batches: 2, log_every: 2}\n"
                "checkpoint: {every: 6}\n")
    with open(ft_cfg, "w") as f:
        f.write(f"run: {{dir: {tmp}/ft, seed: 2, threads: 1, blas_threads: 1}}\n"
                f"data: {{train: {data}/tiny_en_val.txt, val: {data}/tiny_en_val.txt}}\n"
                "train: {batch_size: 2, max_steps: 6, warmup_steps: 1, eval_every: 3, eval_batches: 1, log_every: 1}\n"
                "checkpoint: {every: 6}\nfinetune: {freeze: [blocks.0.], drift_top_k: 5}\n")
    run([lm, "train", "-c", base_cfg])
    run([lm, "train", "-c", base_cfg, "--resume", "auto", "--set", "train.max_steps=18"])  # a resumed segment
    run([lm, "finetune", "--from", f"{tmp}/base", "-c", ft_cfg])


def check_report(exe, tmp, html, run_dir, expect):
    size = os.path.getsize(html)
    check(size < 3 * 1024 * 1024, f"{os.path.basename(html)}: {size} bytes, under 3 MB")
    r, console, requests = browser(exe, "file://" + html, tmp, ["--dump-dom", "--virtual-time-budget=3000"])
    dom = r.stdout
    check(r.returncode == 0 and "</html>" in dom, "chromium dumped the DOM")
    check(console == [], "no console messages: %s" % console[:3])
    check(requests == [], "no network requests by the page: %s" % requests[:3])
    check('data-ready="1"' in dom and 'data-problems="0"' in dom, "the page drew every section without a problem")
    points = len(re.findall(r'<circle [^>]*class="pt[ "]', dom))
    check(points == expect["points"], "%d map points (want %d)" % (points, expect["points"]))
    hint = re.search(r'id="map-search"[^>]*placeholder="([^"]*)"|placeholder="([^"]*)"[^>]*id="map-search"', dom)
    hint = (hint.group(1) or hint.group(2)) if hint else ""
    example = hint.split("e.g. ")[-1] if "e.g. " in hint else ""
    check(hint == "find a piece" or (len(example) >= 4 and example.isalpha() and example.encode() in open(
        os.path.join(run_dir, "tokenizer.model"), "rb").read()),
          "the search box's example is one of the run's own pieces: '%s'" % hint)
    train, periodic, whole = metrics_counts(run_dir)
    check(samples(dom, "train") == train, "train curve: %d samples = metrics.jsonl's %d" % (samples(dom, "train"), train))
    check(samples(dom, "validation (periodic)") == periodic, "periodic validation: %d samples" % periodic)
    check(samples(dom, "validation (whole file)") == whole, "whole-file validation: %d samples" % whole)
    check(count(dom, 'class="resume"') == 4 * expect["resumes"], "%d resume marks per chart" % expect["resumes"])
    check(table_rows(dom, 'id="neighbour-table"') == expect["neighbours"], "neighbour table: %d rows" % expect["neighbours"])
    check(table_rows(dom, 'id="params-table"') == expect["param_rows"], "parameter table: %d rows" % expect["param_rows"])
    return dom


def screenshot(exe, html, png, size):
    """The README's picture of a report, taken by the same browser with the same flags as the test."""
    png = os.path.abspath(png)
    with tempfile.TemporaryDirectory() as tmp:
        r, console, requests = browser(exe, "file://" + os.path.abspath(html), tmp,
                                       ["--window-size=" + size.replace("x", ","), "--screenshot=" + png])
    print("wrote %s (%s; console messages: %d, page requests: %d)" % (png, size, len(console), len(requests)))
    return 0 if r.returncode == 0 and not console and not requests else 1


def main():
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    exe = next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome") if shutil.which(n)), None)
    if not exe:
        print("SKIPPED: chromium is not installed (scripts/setup.sh installs Debian's chromium)")
        return SKIP
    if sys.argv[1] == "--screenshot":
        return screenshot(exe, sys.argv[2], sys.argv[3], sys.argv[4] if len(sys.argv) > 4 else "1280x1700")
    lm, data = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    tmp = sys.argv[3] if len(sys.argv) > 3 else tempfile.mkdtemp(prefix="lmtrain-report-")
    os.makedirs(tmp, exist_ok=True)
    probe = os.path.join(tmp, "probe.html")
    with open(probe, "w") as f:  # the control page: it asks the network for something
        f.write('<!DOCTYPE html><html><body><img src="http://192.0.2.1/leak.png"><p id="p">probe</p></body></html>')
    r, _, requests = browser(exe, "file://" + probe, tmp, ["--dump-dom"])
    if r.returncode != 0 or 'id="p"' not in r.stdout:
        print("SKIPPED: chromium cannot start here (exit %d): %s" % (r.returncode, r.stderr.strip()[-400:]))
        return SKIP
    check(any("192.0.2.1" in u for u in requests), "the NetLog check catches a page's request (control page)")

    make_runs(lm, data, tmp)
    ft = os.path.join(tmp, "ft")
    out = run([lm, "report", ft, "--prompt", "The river flows", "--points", "40", "--neighbours", "6"])
    check("drift measured from" in out and "report.html" in out, "report names the drift base and the file")
    html = os.path.join(ft, "report.html")
    arch = json.load(open(os.path.join(ft, "step_00000006", "arch.json")))
    n_param_rows = 3 + 4 * arch["n_layers"] + (0 if arch.get("tie_embeddings", True) else 1) + 1  # + total
    dom = check_report(exe, tmp, html, ft, {"points": 40, "resumes": 0, "neighbours": 6, "param_rows": n_param_rows})

    probs = json.loads(run([lm, "inspect", "probs", "--checkpoint", ft, "--text", "The river flows", "--json"]))
    check(table_rows(dom, 'id="probs-table"') == len(probs), "next-token table: %d rows = inspect probs" % len(probs))
    check(count(dom, 'class="bar actual"') + count(dom, 'class="bar"') == 5 * len(probs), "5 bars per position")
    drift_json = os.path.join(tmp, "drift.json")
    run([lm, "inspect", "drift", "--from", f"{tmp}/base", "--to", ft, "--tokens", f"{ft}/train.bin", "-k", "20",
         "--json", drift_json])
    want = [t["piece"] for t in json.load(open(drift_json))[0]["top"]]
    table = dom[dom.index('class="top-moved"'):]
    got = re.findall(r'<tr><td class="num">\d+</td><td>(.*?)</td>', table[:table.index("</table>")])
    check(got == [p.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;") for p in want],
          "most-moved table = inspect drift's top 20 in order (%d rows)" % len(got))
    names = safetensors_names(os.path.join(ft, "step_00000006", "model.safetensors"))
    check(table_rows(dom, 'id="sha-table"') == len(names), "SHA-256 table: one row per tensor (%d)" % len(names))
    frozen = sum(n.startswith("blocks.0.") for n in names)
    check(count(dom, 'class="ok">unchanged<') == frozen, "%d frozen tensors (blocks.0.) shown unchanged" % frozen)
    check(table_rows(dom, 'id="forgetting-table"') == 2, "forgetting table: new and original")
    forgetting = json.load(open(os.path.join(ft, "forgetting.json")))
    check(">%.4f<" % forgetting["new"]["after"] in dom, "forgetting table shows forgetting.json's values")
    ftable = dom[dom.index('id="forgetting-table"'):]
    ftable = ftable[:ftable.index("</table>")]
    cells = re.findall(r'<td class="num">([^<]*)</td>', ftable)
    check(len(cells) == 6 and all(re.fullmatch(r"[+-]?\d+\.\d{4}", c) for c in cells),
          "forgetting table: every number to 4 decimals %s" % cells)

    base_html = os.path.join(tmp, "base.html")
    texts = ["the river runs to the sea", "the sea is wide"]
    context = ["--context-piece", "the"] + [a for t in texts for a in ("--context-text", t)]
    run([lm, "report", os.path.join(tmp, "base"), "-o", base_html, "--points", "30", "--neighbours", "4"] + context)
    dom = check_report(exe, tmp, base_html, os.path.join(tmp, "base"),
                       {"points": 30, "resumes": 1, "neighbours": 4, "param_rows": n_param_rows})
    context_json = os.path.join(tmp, "context.json")
    run([lm, "inspect", "context", "--checkpoint", os.path.join(tmp, "base"), "--piece", "the", "--json", context_json]
        + [a for t in texts for a in ("--text", t)])
    want = json.load(open(context_json))["pieces"][0]
    check(table_rows(dom, 'id="context-cosine"') == len(want["pairs"]),
          "context cosine table: %d rows = inspect context's pairs" % len(want["pairs"]))
    lens_rows = len(want["occurrences"]) * len(want["depths"])
    check(table_rows(dom, 'id="context-lens"') == lens_rows, "logit-lens table: %d rows (occurrences x depths)" % lens_rows)
    curves = re.findall(r'<g class="series-group" data-name="text \d+ @\d+ ~ text \d+ @\d+" data-samples="(\d+)"', dom)
    check(len(curves) == len(want["pairs"]) and all(int(c) == len(want["depths"]) for c in curves),
          "cosine-by-depth chart: %d curves of %d depths" % (len(curves), len(want["depths"])))

    shot = os.path.join(tmp, "report.png")
    browser(exe, "file://" + html, tmp, ["--window-size=1200,2400", "--screenshot=" + shot])
    pixels = png_pixels(shot)
    colours = len(np.unique(pixels.reshape(-1, 3), axis=0))
    inked = float((pixels.min(axis=2) < 235).mean())
    check(colours >= 50, "screenshot %dx%d: %d distinct colours" % (pixels.shape[1], pixels.shape[0], colours))
    check(inked > 0.02, "screenshot: %.1f%% of pixels are not near-white" % (100 * inked))
    if len(sys.argv) <= 3:
        shutil.rmtree(tmp, ignore_errors=True)
    print("%d check(s) failed" % len(failures) if failures else "all checks passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
