/* lmtrain report: draws the page from the JSON in #report-data. No libraries, no network: every chart is
   SVG or canvas made here. Each section is drawn on its own, so one that fails leaves the others. */
'use strict';
(function () {
  const D = JSON.parse(document.getElementById('report-data').textContent);
  const app = document.getElementById('app');
  const tip = document.getElementById('tip');
  const NS = 'http://www.w3.org/2000/svg';
  const problems = [];
  window.addEventListener('error', (e) => problems.push(String(e.message)));
  document.addEventListener('securitypolicyviolation', (e) => {
    problems.push('blocked: ' + e.blockedURI);
    console.error('lmtrain report: blocked a request to ' + e.blockedURI);
  });

  // ---- small helpers
  function set(e, attrs) {
    for (const k in attrs || {}) {
      const v = attrs[k];
      if (v === null || v === undefined) continue;
      if (k === 'text') e.textContent = v;
      else if (k === 'cls') e.setAttribute('class', v);
      else e.setAttribute(k, v);
    }
    return e;
  }
  function h(tag, attrs, ...kids) {
    const e = set(document.createElement(tag), attrs);
    for (const k of kids) if (k !== null && k !== undefined) e.append(k);
    return e;
  }
  function s(tag, attrs, parent) {
    const e = set(document.createElementNS(NS, tag), attrs);
    if (parent) parent.append(e);
    return e;
  }
  const isNum = (x) => typeof x === 'number' && isFinite(x);
  const nums = (a) => a.filter(isNum);
  const min = (a) => nums(a).reduce((m, v) => Math.min(m, v), Infinity);
  const max = (a) => nums(a).reduce((m, v) => Math.max(m, v), -Infinity);
  function fmt(x, digits) {
    if (!isNum(x)) return '\u2013';
    if (Number.isInteger(x)) return x.toLocaleString('en-US');
    const a = Math.abs(x);
    if (a !== 0 && (a < 1e-3 || a >= 1e6)) return x.toExponential(2);
    return String(+x.toPrecision(digits || 4));
  }
  const signed = (x) => (isNum(x) && x > 0 ? '+' : '') + fmt(x);
  const piece = (id) => (D.pieces[id] === undefined ? '#' + id : D.pieces[id]);
  function duration(t) {
    t = Math.round(t);
    const hh = Math.floor(t / 3600), mm = Math.floor((t % 3600) / 60), ss = t % 60;
    return (hh ? hh + ' h ' : '') + (hh || mm ? mm + ' min ' : '') + ss + ' s';
  }
  function showTip(ev, text) {
    tip.textContent = text;
    tip.hidden = false;
    tip.style.left = Math.max(4, Math.min(ev.clientX + 14, window.innerWidth - tip.offsetWidth - 8)) + 'px';
    tip.style.top = ev.clientY + 14 + 'px';
  }
  const hideTip = () => { tip.hidden = true; };
  // headers starting with '#' are numeric columns (right-aligned)
  function table(headers, rows, attrs) {
    const t = h('table', attrs), head = h('tr');
    for (const c of headers) head.append(h('th', { text: c.replace(/^#/, ''), cls: c[0] === '#' ? 'num' : null }));
    t.append(h('thead', null, head));
    const body = h('tbody');
    for (const r of rows) {
      const tr = h('tr');
      r.forEach((v, i) => tr.append(v instanceof Node ? h('td', null, v)
        : h('td', { text: typeof v === 'number' ? fmt(v) : String(v === null ? '\u2013' : v), cls: headers[i][0] === '#' ? 'num' : null })));
      body.append(tr);
    }
    t.append(body);
    return t;
  }
  function section(id, title, note) {
    const sec = h('section', { id }, h('h2', { text: title }));
    if (note) sec.append(h('p', { cls: 'note', text: note }));
    app.append(sec);
    return sec;
  }
  const card = (value, label) => h('div', { cls: 'card' }, h('b', { text: value }), h('span', { text: label }));

  // ---- colours and scales
  const VIRIDIS = [[68, 1, 84], [59, 82, 139], [33, 145, 140], [94, 201, 98], [253, 231, 37]];
  function ramp(t) {
    t = Math.max(0, Math.min(1, isNum(t) ? t : 0));
    const f = t * (VIRIDIS.length - 1), i = Math.min(Math.floor(f), VIRIDIS.length - 2), u = f - i;
    const c = VIRIDIS[i].map((a, k) => Math.round(a + (VIRIDIS[i + 1][k] - a) * u));
    return `rgb(${c[0]},${c[1]},${c[2]})`;
  }
  function diverging(v) {  // -1 blue, 0 white, +1 red
    const t = Math.max(-1, Math.min(1, isNum(v) ? v : 0)), a = Math.abs(t);
    const base = t >= 0 ? [178, 24, 43] : [33, 102, 172];
    return base.map((c) => Math.round(255 + (c - 255) * a));
  }
  function linScale(d0, d1, r0, r1) {
    const k = d1 === d0 ? 0 : (r1 - r0) / (d1 - d0);
    const f = (v) => (k === 0 ? (r0 + r1) / 2 : r0 + (v - d0) * k);
    f.inv = (p) => (k === 0 ? d0 : d0 + (p - r0) / k);
    return f;
  }
  function ticks(lo, hi, n) {
    if (!(hi > lo)) return [lo];
    const raw = (hi - lo) / n, mag = Math.pow(10, Math.floor(Math.log10(raw)));
    const step = [1, 2, 5, 10].map((m) => m * mag).find((v) => v >= raw);
    const out = [];
    for (let v = Math.ceil(lo / step) * step; v <= hi + 1e-9 * step; v += step) out.push(+v.toPrecision(12));
    return out;
  }
  function logTicks(a, b) {  // a, b in log10 units
    const out = [];
    for (let e = Math.floor(a); e <= Math.ceil(b); e++) {
      for (const m of [1, 2, 5]) { const t = e + Math.log10(m); if (t >= a && t <= b) out.push(t); }
    }
    return out.length >= 2 ? out : ticks(a, b, 4);
  }
  function nearestIndex(xs, x) {  // xs ascending
    if (!xs.length) return -1;
    let lo = 0, hi = xs.length - 1;
    while (lo < hi) { const mid = (lo + hi) >> 1; if (xs[mid] < x) lo = mid + 1; else hi = mid; }
    if (lo > 0 && Math.abs(xs[lo - 1] - x) <= Math.abs(xs[lo] - x)) lo--;
    return lo;
  }

  // ---- a line chart over steps: {title, xmax, log, marks, series: [{name, x, y, color, dots}]}
  function lineChart(o) {
    const W = 540, H = 250, m = { l: 58, r: 14, t: 26, b: 30 };
    const svg = s('svg', { cls: 'chart', width: W, height: H, viewBox: `0 0 ${W} ${H}`, 'data-chart': o.title });
    s('text', { x: m.l, y: 16, cls: 'title', text: o.title }, svg);
    const used = o.series.filter((q) => q.x.length > 0);
    const ys = [];
    used.forEach((q) => q.y.forEach((v) => { if (isNum(v) && (!o.log || v > 0)) ys.push(v); }));
    if (!ys.length) { s('text', { x: m.l, y: H / 2, text: 'no samples' }, svg); return svg; }
    const tf = o.log ? Math.log10 : (v) => v;
    let a = tf(min(ys)), b = tf(max(ys));
    if (a === b) { a -= 0.5; b += 0.5; }
    const pad = (b - a) * 0.05;
    const X = linScale(0, o.xmax, m.l, W - m.r), Y = linScale(a - pad, b + pad, H - m.b, m.t);
    for (const t of o.log ? logTicks(a - pad, b + pad) : ticks(a - pad, b + pad, 5)) {
      s('line', { x1: m.l, x2: W - m.r, y1: Y(t), y2: Y(t), cls: 'grid' }, svg);
      s('text', { x: m.l - 6, y: Y(t) + 4, 'text-anchor': 'end', text: fmt(o.log ? Math.pow(10, t) : t, 3) }, svg);
    }
    for (const t of ticks(0, o.xmax, 6)) {
      s('line', { x1: X(t), x2: X(t), y1: H - m.b, y2: H - m.b + 4, cls: 'axis' }, svg);
      s('text', { x: X(t), y: H - m.b + 15, 'text-anchor': 'middle', text: fmt(t) }, svg);
    }
    s('line', { x1: m.l, x2: W - m.r, y1: H - m.b, y2: H - m.b, cls: 'axis' }, svg);
    s('text', { x: W - m.r, y: H - 3, 'text-anchor': 'end', text: o.xlabel || 'step' }, svg);
    for (const step of o.marks) {
      s('line', { x1: X(step), x2: X(step), y1: m.t, y2: H - m.b, cls: 'resume' }, svg);
      s('text', { x: X(step) + 3, y: H - m.b - 4, fill: '#b42318', text: 'resumed at ' + step }, svg);
    }
    used.forEach((q, k) => {
      const g = s('g', { cls: 'series-group', 'data-name': q.name, 'data-samples': q.x.length }, svg);
      const pts = [];
      q.x.forEach((x, i) => { if (isNum(q.y[i]) && (!o.log || q.y[i] > 0)) pts.push([X(x), Y(tf(q.y[i]))]); });
      if (pts.length > 1) s('polyline', { points: pts.map((p) => p[0].toFixed(1) + ',' + p[1].toFixed(1)).join(' '), cls: 'series', stroke: q.color }, g);
      if (q.dots || pts.length === 1) pts.forEach((p) => s('circle', { cx: p[0].toFixed(1), cy: p[1].toFixed(1), r: 3, fill: q.color }, g));
      const ly = m.t + 2 + k * 14;
      s('rect', { x: W - m.r - 160, y: ly, width: 12, height: 3, fill: q.color }, svg);
      s('text', { x: W - m.r - 144, y: ly + 5, text: q.name }, svg);
    });
    const cursor = s('line', { y1: m.t, y2: H - m.b, cls: 'cursor', visibility: 'hidden' }, svg);
    const overlay = s('rect', { x: m.l, y: m.t, width: W - m.l - m.r, height: H - m.t - m.b, fill: 'transparent' }, svg);
    overlay.addEventListener('mousemove', (ev) => {
      const box = svg.getBoundingClientRect(), step = X.inv(((ev.clientX - box.left) * W) / box.width);
      const lines = [];
      let snap = null;
      for (const q of used) {
        const i = nearestIndex(q.x, step);
        if (snap === null) snap = q.x[i];
        lines.push(`${q.name}, ${o.xnames ? o.xnames[q.x[i]] : 'step ' + q.x[i]}: ${fmt(q.y[i], 5)}`);
      }
      cursor.setAttribute('x1', X(snap));
      cursor.setAttribute('x2', X(snap));
      cursor.setAttribute('visibility', 'visible');
      showTip(ev, lines.join('\n'));
    });
    overlay.addEventListener('mouseleave', () => { hideTip(); cursor.setAttribute('visibility', 'hidden'); });
    return svg;
  }

  // ---- a histogram of several sets over one range: [{name, v, color}]
  function histogram(title, sets, what = 'of rows have a norm in', unit = 'share of rows', range = null) {
    const W = 440, H = 250, m = { l: 46, r: 12, t: 26, b: 30 }, bins = 30;
    const all = range || sets.flatMap((q) => nums(q.v));
    const lo = min(all), hi = max(all), width = (hi - lo) / bins || 1;
    const svg = s('svg', { cls: 'chart', width: W, height: H, viewBox: `0 0 ${W} ${H}`, 'data-chart': title });
    s('text', { x: m.l, y: 16, cls: 'title', text: `${title} (${unit})` }, svg);
    const shares = sets.map((q) => {
      const c = new Array(bins).fill(0);
      nums(q.v).forEach((v) => { c[Math.min(bins - 1, Math.floor((v - lo) / width))]++; });
      return c.map((x) => x / Math.max(1, q.v.length));
    });
    const X = linScale(lo, lo + bins * width, m.l, W - m.r), Y = linScale(0, max(shares.flat()) || 1, H - m.b, m.t);
    const bw = (W - m.l - m.r) / bins / sets.length;
    sets.forEach((q, k) => shares[k].forEach((f, b) => {
      if (f <= 0) return;
      const r = s('rect', { x: X(lo + b * width) + k * bw, y: Y(f), width: Math.max(bw - 0.5, 0.5), height: H - m.b - Y(f), fill: q.color }, svg);
      const range = `[${fmt(lo + b * width, 3)}, ${fmt(lo + (b + 1) * width, 3)})`;
      r.addEventListener('mousemove', (ev) => showTip(ev, `${q.name}: ${(100 * f).toFixed(1)}% ${what} ${range}`));
      r.addEventListener('mouseleave', hideTip);
    }));
    for (const t of ticks(lo, hi, 5)) s('text', { x: X(t), y: H - m.b + 15, 'text-anchor': 'middle', text: fmt(t, 3) }, svg);
    s('line', { x1: m.l, x2: W - m.r, y1: H - m.b, y2: H - m.b, cls: 'axis' }, svg);
    sets.forEach((q, k) => {
      s('rect', { x: W - m.r - 170, y: m.t + k * 14, width: 10, height: 8, fill: q.color }, svg);
      s('text', { x: W - m.r - 156, y: m.t + 8 + k * 14, text: `${q.name} (${fmt(q.v.length)})` }, svg);
    });
    return svg;
  }

  // ---- sections
  function summary() {
    const S = D.summary, P = S.params, A = S.arch, fv = S.final_val, d = S.data;
    const sec = section('summary', 'Run summary', `Checkpoint ${S.checkpoint} at step ${fmt(S.step)}; run directory ${S.run_dir}.`);
    sec.append(h('div', { cls: 'cards' }, card(fmt(fv.loss), `${fv.kind} validation loss, ${fv.unit}`), card(fmt(fv.ppl), 'perplexity'),
      card(fmt(fv.bpb), 'validation bits per byte'), card(fmt(S.tokens_seen), 'training tokens seen'),
      card(S.wall_s === null ? '\u2013' : duration(S.wall_s), 'wall time of the training processes')));
    sec.append(h('h3', { text: 'Parameters' }));
    sec.append(h('p', { cls: 'note', text: `V ${A.vocab_size}, C ${A.d_model}, L ${A.n_layers}, H ${A.n_heads}, T ${A.max_seq_len}, ` +
      `${A.positions} positions, ${A.tie_embeddings ? 'tied' : 'untied'} head. The token table holds ` +
      `${(100 * P.embedding_share).toFixed(1)}% of the ${fmt(P.total)} parameters.` }));
    sec.append(h('pre', { text: P.arithmetic }));
    sec.append(h('details', null, h('summary', { text: `Parameters by module (${P.lines.length} lines)` }),
      table(['module', 'shapes', '#parameters'], P.lines.map((l) => [l.name, l.shapes, l.count]).concat([['total', '', P.total]]), { id: 'params-table' })));
    sec.append(h('h3', { text: 'Data' }));
    sec.append(table(['split', 'text file', '#bytes', '#tokens'], [['train', d.train.path, d.train.bytes, d.train_tokens],
      ['validation', d.val.path, d.val.bytes, d.val_tokens]], { id: 'data-table' }));
    if (d.held_out_of) {
      sec.append(h('p', { cls: 'note', text: `Both files were cut from ${d.held_out_of}: ${(100 * d.val_fraction).toFixed(1)}% ` +
        'of its lines held out for validation, in contiguous blocks placed by run.seed (data.val_fraction).' }));
    }
    sec.append(h('details', null, h('summary', { text: 'Effective config (config.yaml of the checkpoint)' }), h('pre', { text: S.config_yaml })));
  }

  function curves() {
    const C = D.curves;
    const sec = section('curves', 'Curves', C.found
      ? `From ${C.file}. Hover for values. Dashed red lines mark steps where a later process resumed the run.`
      : `No metrics at ${C.file}: nothing to draw.`);
    if (!C.found) return;
    const toggle = h('input', { type: 'checkbox', id: 'log-toggle' });
    sec.append(h('div', { cls: 'controls' }, h('label', null, toggle, ' log scale (y)')));
    const box = h('div', { cls: 'row', id: 'curve-charts' });
    sec.append(box);
    const xmax = Math.max(1, max(C.train.step.concat(C.val.step, C.full.step)));
    const marks = C.segments.filter((g) => g.kind === 'resume').map((g) => g.step);
    const draw = () => {
      const log = toggle.checked, base = { xmax, log, marks };
      box.replaceChildren(
        lineChart(Object.assign({ title: `loss (${C.loss_unit})`, series: [
          { name: 'train', x: C.train.step, y: C.train.loss, color: '#2463eb' },
          { name: 'validation (periodic)', x: C.val.step, y: C.val.loss, color: '#f08c00', dots: true },
          { name: 'validation (whole file)', x: C.full.step, y: C.full.loss, color: '#b42318', dots: true }] }, base)),
        lineChart(Object.assign({ title: 'validation bits per byte', series: [
          { name: 'periodic', x: C.val.step, y: C.val.bpb, color: '#f08c00', dots: true },
          { name: 'whole file', x: C.full.step, y: C.full.bpb, color: '#b42318', dots: true }] }, base)),
        lineChart(Object.assign({ title: 'learning rate', series: [{ name: 'lr', x: C.train.step, y: C.train.lr, color: '#7048e8' }] }, base)),
        lineChart(Object.assign({ title: 'tokens/s', series: [{ name: 'tokens/s', x: C.train.step, y: C.train.tokens_per_s, color: '#0f9d58' }] }, base)));
    };
    toggle.addEventListener('change', draw);
    draw();
  }

  function colourBar(lmax) {
    const W = 380, svg = s('svg', { width: W, height: 34, 'aria-label': 'colour scale' });
    for (let i = 0; i < 40; i++) s('rect', { x: 10 + i * 9, y: 4, width: 9.5, height: 10, fill: ramp(i / 39) }, svg);
    s('text', { x: 10, y: 28, text: '0 occurrences', 'font-size': 11, fill: '#5b6474' }, svg);
    s('text', { x: 370, y: 28, 'text-anchor': 'end', text: fmt(Math.round(Math.pow(10, lmax) - 1)) + ' (log scale)', 'font-size': 11, fill: '#5b6474' }, svg);
    return svg;
  }

  function embeddingMap() {
    const M = D.map, n = M.ids.length, counted = n > 0 && M.count[0] !== null;
    const sec = section('map', 'Embedding map', `The ${fmt(n)} ${counted ? 'most frequent pieces' : 'first pieces'} of ${M.tensor}, ` +
      `projected by ${M.method} onto the table's two main axes (${(100 * M.explained[0]).toFixed(1)}% and ` +
      `${(100 * M.explained[1]).toFixed(1)}% of the variance of these rows). ` +
      (counted ? `Colour: log frequency in ${M.counts_source}. ` : `One colour: ${M.counts_source}. `) +
      'Hover a point for its piece; click it (or search) for its nearest neighbours by cosine over the whole table.');
    // The example in the search box: the run's own most frequent piece of four letters or more.
    const example = M.ids.map((id) => piece(id).replace(/^\u2581/, '')).find((p) => /^\p{L}{4,}$/u.test(p));
    const search = h('input', { type: 'search', id: 'map-search', placeholder: 'find a piece' + (example ? ', e.g. ' + example : '') });
    const status = h('span', { cls: 'note', id: 'map-status' });
    sec.append(h('div', { cls: 'controls' }, search, status));
    const W = 720, H = 540, pad = 14;
    const svg = s('svg', { cls: 'chart', id: 'map-svg', width: W, height: H, viewBox: `0 0 ${W} ${H}` });
    const X = linScale(min(M.x), max(M.x), pad, W - pad), Y = linScale(min(M.y), max(M.y), H - pad, pad);
    const lf = M.count.map((c) => Math.log10(1 + (c || 0))), lmax = Math.max(1e-9, max(lf));
    const dots = new Array(n);
    for (let i = n - 1; i >= 0; i--) {  // rarest first, so frequent pieces are drawn on top
      dots[i] = s('circle', { cx: X(M.x[i]).toFixed(1), cy: Y(M.y[i]).toFixed(1), r: 3.2, cls: 'pt', 'data-i': i,
        fill: counted ? ramp(lf[i] / lmax) : '#2463eb' }, svg);
    }
    const panel = h('div', { cls: 'panel', id: 'map-panel' });
    sec.append(h('div', { cls: 'row' }, h('div', null, svg, counted ? colourBar(lmax) : null), panel));
    const byId = new Map(M.ids.map((id, i) => [id, i]));
    const label = (i) => `${piece(M.ids[i])}  (id ${M.ids[i]})` + (counted ? `\n${fmt(M.count[i])} times in the training data` : '');
    const pointOf = (ev) => (ev.target.dataset && ev.target.dataset.i !== undefined ? +ev.target.dataset.i : -1);
    function select(i) {
      dots.forEach((d) => d.classList.remove('sel', 'nb'));
      dots[i].classList.add('sel');
      const ids = M.neighbours.ids[i], cos = M.neighbours.cos[i];
      ids.forEach((id) => { if (byId.has(id)) dots[byId.get(id)].classList.add('nb'); });
      panel.replaceChildren(h('h3', { text: `Nearest to ${piece(M.ids[i])} (id ${M.ids[i]})` }),
        table(['#rank', 'piece', '#id', '#cosine', 'on map'], ids.map((id, k) => [k + 1, piece(id), id, cos[k], byId.has(id) ? 'yes' : 'no']),
          { id: 'neighbour-table' }));
    }
    svg.addEventListener('mousemove', (ev) => { const i = pointOf(ev); if (i < 0) hideTip(); else showTip(ev, label(i)); });
    svg.addEventListener('mouseleave', hideTip);
    svg.addEventListener('click', (ev) => { const i = pointOf(ev); if (i >= 0) select(i); });
    search.addEventListener('input', () => {
      const q = search.value.trim().toLowerCase();
      let hits = 0, first = -1, exact = -1;
      dots.forEach((d, i) => {
        const p = piece(M.ids[i]).toLowerCase(), bare = p.replace(/\u2581/g, '');
        const hit = q !== '' && (bare.includes(q) || p.includes(q));
        d.classList.toggle('hit', hit);
        d.classList.toggle('dim', q !== '' && !hit);
        if (hit) { hits++; if (first < 0) first = i; if (exact < 0 && bare === q) exact = i; }
      });
      status.textContent = q === '' ? '' : `${hits} of ${fmt(n)} pieces match`;
      if (exact >= 0 || first >= 0) select(exact >= 0 ? exact : first);
    });
    if (n > 0) select(0);
  }

  function positions() {
    const P = D.positions, n = P.positions.length, step = n > 1 ? P.positions[1] - P.positions[0] : 1;
    const rope = P.kind === 'rope', every = step > 1 ? ` (positions 0, ${step}, ${2 * step}, \u2026)` : '';
    const sec = section('positions', 'Positions', rope
      ? 'rope positions: nothing is added to the token rows; each head\u2019s q and k are rotated by their position. Left: cosine ' +
        `between one unit vector rotated to two positions${every}; it depends on their offset only, so every diagonal is ` +
        `constant (relative offsets, where learned and sinusoidal tables encode absolute places). The pairs\u2019 wavelengths run from ` +
        `${fmt(P.wavelengths[0], 3)} to ${fmt(P.wavelengths[P.wavelengths.length - 1], 3)} tokens. Right: vector norms of the token rows on the map.`
      : `${P.kind} positions. Left: cosine similarity between the position vectors${every}; sinusoidal ones give smooth bands along ` +
        'the diagonal, learned ones whatever training made of them. Right: vector norms of the token rows on the map and of the position rows.');
    const canvas = h('canvas', { width: n, height: n, id: 'pos-heatmap' });
    canvas.style.cssText = 'width:360px;height:360px;image-rendering:pixelated;border:1px solid #d9dee7';
    const ctx = canvas.getContext('2d'), img = ctx.createImageData(n, n);
    for (let i = 0; i < n; i++) {
      for (let j = 0; j < n; j++) {
        const c = diverging(P.cos[i][j]), o = 4 * (i * n + j);
        img.data[o] = c[0]; img.data[o + 1] = c[1]; img.data[o + 2] = c[2]; img.data[o + 3] = 255;
      }
    }
    ctx.putImageData(img, 0, 0);
    canvas.addEventListener('mousemove', (ev) => {
      const b = canvas.getBoundingClientRect();
      const i = Math.min(n - 1, Math.floor(((ev.clientY - b.top) / b.height) * n)), j = Math.min(n - 1, Math.floor(((ev.clientX - b.left) / b.width) * n));
      showTip(ev, `positions ${P.positions[i]} and ${P.positions[j]}: cosine ${fmt(P.cos[i][j], 3)}`);
    });
    canvas.addEventListener('mouseleave', hideTip);
    const left = h('div', null, canvas, h('p', { cls: 'note', text: `blue \u22121, white 0, red +1; positions 0 to ${P.positions[n - 1]} down and across` }));
    const sets = [{ name: 'token rows', v: P.tok_norms, color: '#2463eb' }];
    if (P.pos_norms.length) sets.push({ name: 'position rows', v: P.pos_norms, color: '#f08c00' });
    sec.append(h('div', { cls: 'row' }, left, histogram('row norms', sets)));
  }

  function driftScatter(R, top) {
    const W = 720, H = 320, m = { l: 58, r: 14, t: 26, b: 34 }, counted = R.counts.length > 0;
    const xs = R.l2.map((_, i) => (counted ? Math.log10(1 + R.counts[i]) : i));
    const svg = s('svg', { cls: 'chart', id: 'drift-svg', width: W, height: H, viewBox: `0 0 ${W} ${H}` });
    s('text', { x: m.l, y: 16, cls: 'title', text: 'L2 drift of each row vs ' + (counted ? "log10(1 + count in this run's training data)" : 'id') }, svg);
    const X = linScale(0, Math.max(1e-9, max(xs)), m.l, W - m.r), Y = linScale(0, Math.max(1e-12, max(R.l2)), H - m.b, m.t);
    for (const t of ticks(0, max(R.l2), 5)) s('text', { x: m.l - 6, y: Y(t) + 4, 'text-anchor': 'end', text: fmt(t, 3) }, svg);
    for (const t of ticks(0, max(xs), 6)) s('text', { x: X(t), y: H - m.b + 15, 'text-anchor': 'middle', text: fmt(t, 3) }, svg);
    s('line', { x1: m.l, x2: W - m.r, y1: H - m.b, y2: H - m.b, cls: 'axis' }, svg);
    R.l2.forEach((v, i) => s('circle', { cx: X(xs[i]).toFixed(1), cy: Y(v).toFixed(1), r: top.has(i) ? 3.2 : 1.8, cls: 'dpt', 'data-i': i,
      fill: top.has(i) ? '#b42318' : 'rgba(36,99,235,.55)' }, svg));
    svg.addEventListener('mousemove', (ev) => {
      const i = ev.target.dataset && ev.target.dataset.i !== undefined ? +ev.target.dataset.i : -1;
      if (i < 0) return hideTip();
      showTip(ev, `${piece(i)}  (id ${i})\nL2 ${fmt(R.l2[i], 4)}, 1 \u2212 cos ${fmt(R.cos_drift[i], 4)}` + (counted ? `\n${fmt(R.counts[i])} times in this run's training data` : ''));
    });
    svg.addEventListener('mouseleave', hideTip);
    return svg;
  }

  function drift() {
    const R = D.drift;
    if (!R) { if (D.drift_note) section('drift', 'Fine-tune drift', D.drift_note); return; }
    const tok = R.reports[0];
    const sec = section('drift', 'Fine-tune drift', `How far each row of tok_emb.weight moved from ${R.base} (step ${fmt(R.base_step)}) ` +
      `to this checkpoint (step ${fmt(D.summary.step)}), against how often its piece occurs in ${R.counts_source}.`);
    sec.append(h('div', { cls: 'cards' }, card(fmt(tok.l2.mean), 'mean L2 drift'), card(fmt(tok.l2.p95), 'p95 L2 drift'),
      card(fmt(tok.l2.max), 'largest L2 drift'),
      card(R.counts.length ? fmt(tok.unseen_rows) : '\u2013', 'rows never seen in the training data of this run')));
    sec.append(driftScatter(R, new Set(tok.top.map((t) => t.id))));
    for (const r of R.reports) {
      sec.append(h('h3', { text: `Most moved pieces of ${r.tensor}` }));
      if (!(r.l2.max > 0)) {
        sec.append(h('p', { cls: 'ok none-moved', text: `none moved: all ${fmt(r.rows)} rows are exactly as in the base checkpoint` }));
        continue;
      }
      sec.append(table(['#rank', 'piece', '#id', '#L2', '#1 \u2212 cos', '#count in this run\'s training data'],
        r.top.map((t, k) => [k + 1, t.piece, t.id, t.l2, t.cos_drift, t.count < 0 ? null : t.count]), { cls: 'top-moved' }));
    }
    const T = R.proof.tensors, same = T.filter((t) => t.before !== '' && t.before === t.after).length;
    sec.append(h('h3', { text: 'Frozen or not: SHA-256 of every tensor, base and this checkpoint' }));
    const cfg = Object.entries(R.proof.config).map(([k, v]) => `${k}: ${v}`).join(', ');
    sec.append(h('p', { cls: 'note', text: `${same} of ${T.length} tensors are bit-identical to the base.` + (cfg ? ` Fine-tune config: ${cfg}.` : '') }));
    const verdict = (t) => (t.before === '' ? h('span', { text: 'not in the base' })
      : t.before === t.after ? h('span', { cls: 'ok', text: 'unchanged' }) : h('span', { cls: 'moved', text: 'changed' }));
    sec.append(h('details', null, h('summary', { text: `the ${T.length} tensors` }),
      table(['tensor', 'shape', 'SHA-256 in base', 'SHA-256 here', 'verdict'],
        T.map((t) => [t.name, t.shape, h('code', { text: t.before.slice(0, 16) }), h('code', { text: t.after.slice(0, 16) }), verdict(t)]), { id: 'sha-table' })));
    const F = R.forgetting;
    sec.append(h('h3', { text: 'Forgetting (validation loss, nats/token, whole files; measured by lmtrain finetune at the end of the run, against its --from)' }));
    if (!F) { sec.append(h('p', { cls: 'note', text: 'No forgetting.json in the run directory.' })); return; }
    // One format for the whole table: losses and their changes to 4 decimals.
    const nats = (x) => (isNum(x) ? x.toFixed(4) : '\u2013');
    const change = (a, b) => (isNum(a) && isNum(b) ? (b - a > 0 ? '+' : '') + (b - a).toFixed(4) : '\u2013');
    sec.append(table(['validation set', 'text file', '#before', '#after', '#change'], [
      ['new (fine-tune data)', F.new.val, nats(F.new.before), nats(F.new.after), change(F.new.before, F.new.after)],
      ['original', F.original.val, nats(F.original.before), nats(F.original.after), change(F.original.before, F.original.after)]],
      { id: 'forgetting-table' }));
  }

  function sentences() {
    const V = D.sentences;
    if (!V) return;
    const sec = section('sentences', 'Sentence vectors', `A contrastive fine-tune (finetune.objective contrastive: ${V.pool} pooling, ` +
      `temperature ${V.temperature}${V.lm_weight > 0 ? `, lm_weight ${V.lm_weight}` : ''}). Each of the ${fmt(V.pairs)} held-out pairs ` +
      `(${V.source}) has its anchor retrieve its positive among all ${fmt(V.pairs)} by cosine; measured by lmtrain finetune at the ` +
      'end of the run, with the starting checkpoint (before) and the result (after).');
    const cell = (x) => (isNum(x) ? x.toFixed(4) : '\u2013');
    sec.append(table(['', '#top-1', '#top-10', '#MRR', '#mean cosine, positive pairs', '#mean cosine, random pairs'],
      [['before', V.before], ['after', V.after], ['chance', V.chance]].map(([k, r]) =>
        [k, cell(r.top1), cell(r.top10), cell(r.mrr), cell(r.mean_cosine_positive), cell(r.mean_cosine_random)]), { id: 'sentences-table' }));
    sec.append(h('p', { cls: 'note', text: 'Random pairs: anchor i with the positive of pair i + N/2. Vectors that work put the ' +
      'positive pairs to the right of the random ones, with little overlap.' }));
    const keys = ['before', 'after'];  // one x range for both, so that they compare by eye
    const range = keys.flatMap((k) => nums(V[k].cosines_positive).concat(nums(V[k].cosines_random)));
    sec.append(h('div', { cls: 'row' }, ...keys.map((k) => histogram(`cosine ${k}`,
      [{ name: 'positive pairs', v: V[k].cosines_positive, color: '#2463eb' }, { name: 'random pairs', v: V[k].cosines_random, color: '#f08c00' }],
      'of the pairs have a cosine in', 'share of pairs', [min(range), max(range)]))));
  }

  function bars(r) {
    const cell = h('div');
    for (const a of r.top) {
      const bar = h('div', { cls: 'bar' + (a.id === r.next_id ? ' actual' : '') }, h('i'), h('span', { text: `${a.piece}  ${(100 * a.prob).toFixed(1)}%` }));
      bar.firstChild.style.width = (100 * a.prob).toFixed(2) + '%';
      cell.append(bar);
    }
    return cell;
  }

  function probs() {
    const Q = D.probs;
    if (!Q) return;
    const sec = section('probs', 'Next-token bars', `Teacher-forced over "${Q.prompt}": at each position, the model's top guesses for the ` +
      'next piece (as lmtrain inspect probs). Orange: the piece that actually came next.');
    sec.append(table(['#pos', 'context ends with', 'top guesses', 'actual next', '#p(actual)', '#rank'],
      Q.rows.map((r) => [r.position, r.context, bars(r), r.next, r.prob, r.rank]), { cls: 'bars', id: 'probs-table' }));
  }

  function context() {
    const X = D.context;
    if (!X) return;
    const place = (o) => `text ${o.text + 1} @${o.position}`;
    const sec = section('context', 'Context', `The piece "${X.piece}" in ${X.occurrences.length} places, through the model ` +
      '(as lmtrain inspect context). The input row is the same row for the same id (cosine 1); positions and the blocks ' +
      'make each occurrence context-aware. The logit lens reads the output head from each depth, ln_f applied first.');
    sec.append(h('ul', null, ...X.occurrences.map((o) => h('li', { text: place(o) + ': ' + X.texts[o.text] }))));
    const colours = ['#1f77b4', '#d62728', '#2ca02c', '#9467bd', '#ff7f0e', '#8c564b'];
    const depth = X.depths.map((_, i) => i);
    sec.append(lineChart({ title: 'cosine between occurrences, by depth (0 = input row)', xmax: X.depths.length - 1, marks: [],
      xlabel: 'depth', xnames: X.depths,
      series: X.pairs.map((p, k) => ({ name: place(X.occurrences[p.a]) + ' ~ ' + place(X.occurrences[p.b]),
        x: depth, y: p.cosine, color: colours[k % colours.length], dots: true })) }));
    sec.append(table(['pair', ...X.depths.map((d) => '#' + d)],
      X.pairs.map((p) => [place(X.occurrences[p.a]) + ' ~ ' + place(X.occurrences[p.b]), ...p.cosine.map((c) => fmt(c, 3))]),
      { id: 'context-cosine' }));
    const rows = [];
    for (const o of X.occurrences) {
      o.lens.forEach((top, d) => rows.push([d === 0 ? place(o) : '', X.depths[d],
        top.map((t) => `${t.piece} ${(100 * t.prob).toFixed(1)}%`).join(', ')]));
    }
    sec.append(table(['occurrence', 'depth', 'logit lens: top next pieces'], rows, { id: 'context-lens' }));
  }

  for (const [name, draw] of [['summary', summary], ['curves', curves], ['map', embeddingMap], ['positions', positions], ['drift', drift], ['sentences', sentences], ['probs', probs], ['context', context]]) {
    try {
      draw();
    } catch (e) {
      problems.push(name + ': ' + e);
      console.error('lmtrain report: the ' + name + ' section failed: ' + ((e && e.stack) || e));
      app.append(h('p', { cls: 'err', text: `The ${name} section could not be drawn: ${e}` }));
    }
  }
  app.append(h('p', { cls: 'note', text: 'Written by lmtrain report. Self-contained: this file loads nothing from anywhere.' }));
  document.body.dataset.problems = String(problems.length);
  document.body.dataset.ready = '1';
})();
