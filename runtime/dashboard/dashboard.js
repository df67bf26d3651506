// Pipeline Proxy dashboard (served by the proxy on the profiling port, docs/dashboard.md): the
// per-step table from /api/profile every 5 s, trend charts from /api/profile/series (uPlot), the
// interactive flame graph from /api/profile/flamegraph. Plain script, no build step, no network
// access beyond the proxy that serves it.
'use strict';
(function () {
  const REFRESH_MS = 5000;
  const $ = (id) => document.getElementById(id);
  const state = {
    token: sessionStorage.getItem('proxy.token') || '',
    pipelineId: '',
    variant: 'baseline',
    sortKey: 'p99_latency_us',
    sortDir: -1,
    rows: [],
    chart: null,
    flameUrl: null,
  };

  // A token may be handed over in the fragment (#token=…): kept for the session, removed from the URL.
  const m = /(?:^#|&)token=([^&]+)/.exec(location.hash);
  if (m) {
    state.token = decodeURIComponent(m[1]);
    sessionStorage.setItem('proxy.token', state.token);
    history.replaceState(null, '', location.pathname + location.search);
  }

  class ApiError extends Error {
    constructor(status, code, message) { super(message); this.status = status; this.code = code; }
  }

  async function api(path, asText) {
    const headers = state.token ? { authorization: 'Bearer ' + state.token } : {};
    const res = await fetch(path, { headers });
    if (!res.ok) {
      let code = 'HTTP_' + res.status, message = res.statusText;
      try { const b = await res.json(); code = b.error.code; message = b.error.message; } catch (e) { /* not JSON */ }
      throw new ApiError(res.status, code, message);
    }
    return asText ? res.text() : res.json();
  }

  function graphQuery() {
    return 'pipeline_id=' + encodeURIComponent(state.pipelineId) + '&pipeline=' + state.variant;
  }

  // ---- notices -----------------------------------------------------------------------------
  function notice(text) {
    const n = $('notice');
    n.textContent = text || '';
    n.hidden = !text;
  }

  /** Shows what an API error means for the user; returns true when it was handled. */
  function explain(err) {
    if (!(err instanceof ApiError)) { notice('The proxy did not answer: ' + err.message); return true; }
    if (err.status === 401) {
      $('auth').hidden = false;
      notice('This profiling endpoint needs a token (profiling.token): enter it above.');
      return true;
    }
    if (err.code === 'PROXY_ERR_PROFILING_DISABLED') {
      notice('Profiling is disabled on this proxy (profiling.enabled: false): there is nothing to show. Enable it in the configuration and reload.');
      return true;
    }
    return false;
  }

  // ---- graphs ------------------------------------------------------------------------------
  async function loadGraphs() {
    const g = await api('/api/profile/graphs');
    const sel = $('pipeline-id');
    // The configured pipelines in matching order (config `pipelines`), then any graph recorded
    // earlier under another id (a pipeline a reload removed).
    const ids = Array.from(new Set((g.pipelines || [g.default_pipeline_id]).concat(g.graphs.map((x) => x.pipeline_id))));
    sel.replaceChildren(...ids.map((id) => new Option(id === g.default_pipeline_id && ids.length > 1 ? id + ' (default)' : id, id)));
    state.pipelineId = state.pipelineId || g.default_pipeline_id;
    sel.value = state.pipelineId;
    const hasCandidate = g.graphs.some((x) => x.pipeline_id === state.pipelineId && x.pipeline === 'candidate');
    $('variant').querySelector('option[value=candidate]').textContent = hasCandidate ? 'candidate' : 'candidate (none recorded)';
  }

  // ---- profiling table ---------------------------------------------------------------------
  function fmt(n) { return Math.round(n).toLocaleString('en-US'); }

  function renderTable() {
    const key = state.sortKey, dir = state.sortDir;
    const rows = state.rows.slice().sort((a, b) => {
      const x = a[key], y = b[key];
      const c = typeof x === 'string' ? x.localeCompare(y) : x - y;
      return c * dir || a.name.localeCompare(b.name);
    });
    const body = $('steps').tBodies[0];
    body.replaceChildren(...rows.map((r) => {
      const tr = document.createElement('tr');
      const cells = [
        [r.name, ''], [r.phase, ''], [fmt(r.avg_latency_us), 'num'], [fmt(r.p50_latency_us), 'num'],
        [fmt(r.p95_latency_us), 'num'], [fmt(r.p99_latency_us), 'num'], [fmt(r.max_latency_us), 'num'],
        [r.error_rate.toFixed(2) + ' %', r.error_rate > 0 ? 'num bad' : 'num'],
      ];
      for (const [text, cls] of cells) {
        const td = document.createElement('td');
        td.textContent = text;
        if (cls) td.className = cls;
        tr.appendChild(td);
      }
      return tr;
    }));
    for (const th of document.querySelectorAll('#steps th')) {
      th.setAttribute('aria-sort', th.dataset.key === key ? (dir < 0 ? 'descending' : 'ascending') : 'none');
    }
  }

  // Numbered like the trend chart's refreshes: the 5 s refresh asked before a change of pipeline or
  // variant must not fill the table after the answer for the new selection.
  let tableGeneration = 0;

  async function refreshTable() {
    const generation = ++tableGeneration;
    try {
      const s = await api('/api/profile?' + graphQuery());
      if (generation !== tableGeneration) return;
      notice('');
      state.rows = s.steps.map((r) => Object.assign({}, r, { error_rate: r.invocations > 0 ? (100 * r.errors) / r.invocations : 0 }));
      $('summary').textContent = s.total_requests === 0
        ? 'No requests recorded for ' + state.pipelineId + '/' + state.variant + ' yet.'
        : fmt(s.total_requests) + ' requests — average ' + fmt(s.avg_total_latency_us) + ' µs total, '
          + fmt(s.avg_upstream_latency_us) + ' µs upstream, ' + fmt(s.avg_pipeline_overhead_us) + ' µs pipeline overhead';
      $('updated').textContent = 'updated ' + new Date().toLocaleTimeString();
      renderTable();
    } catch (err) {
      if (generation !== tableGeneration) return;
      if (!explain(err)) notice('Profile: ' + err.message);
    }
  }

  function sortBy(key) {
    if (state.sortKey === key) state.sortDir = -state.sortDir;
    else { state.sortKey = key; state.sortDir = key === 'name' || key === 'phase' ? 1 : -1; }
    renderTable();
  }

  // ---- trends ------------------------------------------------------------------------------
  const PALETTE = ['#0a58ca', '#d63384', '#198754', '#fd7e14', '#6f42c1', '#20c997', '#dc3545', '#6c757d', '#0dcaf0', '#ffc107'];

  /** Seconds the running interval has lasted so far. */
  function liveSeconds(live) {
    return Math.round((Date.parse(live.t) - Date.parse(live.since)) / 1000);
  }

  // Each refresh is numbered; one whose answer arrives after a later one began draws nothing, so
  // two quick changes (range, then figure) end on the chart the last change asked for.
  let trendsGeneration = 0;

  async function refreshTrends() {
    const generation = ++trendsGeneration;
    const info = $('trends-info');
    const figure = $('figure').value;
    const from = Date.now() - Number($('range').value);
    let series;
    try {
      series = await api('/api/profile/series?' + graphQuery() + '&from=' + from);
      if (generation !== trendsGeneration) return;
    } catch (err) {
      if (generation !== trendsGeneration) return;
      if (explain(err)) return;
      info.textContent = err.code === 'PROXY_ERR_NOT_FOUND'
        ? 'This proxy serves no time series (GET /api/profile/series answered 404).'
        : 'Series: ' + err.message;
      return;
    }
    // The interval still running (`live`, partial) is drawn as the last point, so the chart shows
    // the traffic since the last snapshot, and has a point before the first one.
    const points = series.live ? series.points.concat([series.live]) : series.points;
    const keys = [];
    for (const p of points) for (const s of p.steps) {
      const k = s.name + ' (' + s.phase + ')';
      if (!keys.includes(k)) keys.push(k);
    }
    const xs = points.map((p) => Date.parse(p.t) / 1000);
    const data = [xs].concat(keys.map((k) => points.map((p) => {
      const s = p.steps.find((x) => x.name + ' (' + x.phase + ')' === k);
      return s === undefined || s.count === 0 ? null : s[figure];
    })));
    info.textContent = series.points.length + ' snapshots, one every ' + series.interval_s + ' s'
      + (series.live ? ', and the current interval so far (' + liveSeconds(series.live) + ' s)' : '')
      + (series.truncated ? ' (truncated: narrow the range)' : '');
    const el = $('chart');
    if (state.chart) { state.chart.destroy(); state.chart = null; }
    el.replaceChildren();
    if (xs.length === 0) { info.textContent = 'No snapshots in this range yet (one is written every ' + series.interval_s + ' s).'; return; }
    const dark = matchMedia('(prefers-color-scheme: dark)').matches;
    const axis = { stroke: dark ? '#9da7b3' : '#57606a', grid: { stroke: dark ? '#30363d' : '#e5e8eb' } };
    state.chart = new uPlot({
      width: Math.min(1100, el.clientWidth || 1100), height: 360,
      // Points shown on every series: a single point (the live one, right after a start) has no line to draw.
      series: [{}].concat(keys.map((k, i) => ({
        label: k, stroke: PALETTE[i % PALETTE.length], width: 1.5, spanGaps: false,
        points: { show: true, size: 6, fill: PALETTE[i % PALETTE.length] },
      }))),
      axes: [axis, Object.assign({ label: $('figure').selectedOptions[0].textContent + ' (µs)' }, axis)],
      // One x value (the live point alone, right after a start): uPlot would span years around it;
      // show one snapshot interval either side instead.
      scales: { x: { time: true, range: () => (xs.length === 1 ? [xs[0] - series.interval_s, xs[0] + series.interval_s] : [xs[0], xs[xs.length - 1]]) } },
    }, data, el);
    el.dataset.figure = figure;
    el.dataset.points = String(series.points.length);
    el.dataset.live = series.live ? 'true' : 'false';
  }

  // ---- flame graph -------------------------------------------------------------------------
  // Numbered like the table's and the chart's refreshes: of two quick submits, the later one's graph stays.
  let flameGeneration = 0;

  async function drawFlame(ev) {
    if (ev) ev.preventDefault();
    const generation = ++flameGeneration;
    const q = graphQuery() + '&duration=' + encodeURIComponent($('flame-duration').value)
      + '&min_width=' + encodeURIComponent($('flame-min-width').value)
      + ($('flame-title').value ? '&title=' + encodeURIComponent($('flame-title').value) : '');
    try {
      const svg = await api('/api/profile/flamegraph?' + q, true);
      if (generation !== flameGeneration) return;
      if (state.flameUrl) URL.revokeObjectURL(state.flameUrl);
      // A blob URL keeps the SVG's own script (zoom, search) working inside the frame, with the token sent by fetch.
      state.flameUrl = URL.createObjectURL(new Blob([svg], { type: 'image/svg+xml' }));
      $('flame').src = state.flameUrl;
      const dl = $('flame-download');
      dl.href = state.flameUrl;
      dl.hidden = false;
      notice('');
    } catch (err) {
      if (generation !== flameGeneration) return;
      if (!explain(err)) notice('Flame graph: ' + err.message);
    }
  }

  // ---- canary ------------------------------------------------------------------------------
  // The control plane is another port (control_plane.port) with its own tokens; the page learns
  // its URL from /dashboard/config.json and calls it directly (it answers CORS for that).
  const canary = { url: null, widget: null, token: sessionStorage.getItem('proxy.controlToken') || '' };

  // Numbered too: of two quick changes of "all", the list the later one asked for stays.
  let canariesGeneration = 0;

  async function loadCanaries() {
    const generation = ++canariesGeneration;
    const off = $('canary-off');
    let cfg;
    try {
      cfg = await (await fetch('/dashboard/config.json')).json();
      if (generation !== canariesGeneration) return;
    } catch (err) {
      if (generation !== canariesGeneration) return;
      off.textContent = 'The dashboard configuration did not load: ' + err.message;
      off.hidden = false;
      return;
    }
    canary.url = cfg.control_plane_url;
    if (!canary.url) {
      off.textContent = 'Canary deployments are disabled on this proxy: the control plane is not configured (control_plane in the configuration).';
      off.hidden = false;
      $('canary-form').hidden = true;
      return;
    }
    off.hidden = true;
    $('canary-form').hidden = false;
    $('canary-token').value = canary.token;
    const info = $('canary-info');
    try {
      const res = await fetch(canary.url + '/api/v1/canary?status=' + ($('canary-all').checked ? 'all' : 'active'), {
        headers: canary.token ? { authorization: 'Bearer ' + canary.token } : {},
      });
      const body = await res.json();
      if (generation !== canariesGeneration) return;
      if (!res.ok) { info.textContent = res.status === 401 ? 'Enter a control-plane token ' +
        '(control_plane.tokens).' : body.error.code + ': ' + body.error.message; return; }
      const sel = $('canary-select');
      const keep = sel.value;
      sel.replaceChildren(...body.canaries.map((c) => new Option(c.canary_id + ' — ' + c.pipeline_id + ' (' + c.status + ', ' + c.traffic_pct + '%)',
        c.canary_id)));
      if (keep && body.canaries.some((c) => c.canary_id === keep)) sel.value = keep;
      info.textContent = body.total === 0 ? 'No canary ' + ($('canary-all').checked ? 'yet' : 'is running') + '.' : body.total + ' ' +
        'canar' + (body.total === 1 ? 'y' : 'ies');
      if (body.total > 0 && canary.widget === null) showCanary();
    } catch (err) {
      if (generation !== canariesGeneration) return;
      info.textContent = 'The control plane did not answer: ' + err.message;
    }
  }

  function showCanary(ev) {
    if (ev) ev.preventDefault();
    const id = $('canary-select').value;
    if (!id) return loadCanaries();
    if (canary.widget) canary.widget.close();
    canary.widget = window.ProxyCanaryWidget.mount($('canary-widget'), {
      baseUrl: canary.url, canaryId: id, token: canary.token, refreshInterval: 5000,
      showActions: $('canary-actions').checked,
      theme: matchMedia('(prefers-color-scheme: dark)').matches ? 'dark' : 'light',
    });
  }

  // ---- tabs --------------------------------------------------------------------------------
  const tabs = Array.from(document.querySelectorAll('[role=tab]'));
  function select(tab) {
    for (const t of tabs) {
      const on = t === tab;
      t.setAttribute('aria-selected', String(on));
      t.tabIndex = on ? 0 : -1;
      $(t.getAttribute('aria-controls')).hidden = !on;
    }
    if (tab.id === 'tab-trends') refreshTrends();
    if (tab.id === 'tab-flame' && !state.flameUrl) drawFlame();
    if (tab.id === 'tab-canary') loadCanaries();
  }
  for (const t of tabs) {
    t.addEventListener('click', () => select(t));
    t.addEventListener('keydown', (e) => {
      const i = tabs.indexOf(t);
      const j = e.key === 'ArrowRight' ? (i + 1) % tabs.length : e.key === 'ArrowLeft' ? (i + tabs.length - 1) % tabs.length : -1;
      if (j >= 0) { tabs[j].focus(); select(tabs[j]); }
    });
  }

  // ---- wiring ------------------------------------------------------------------------------
  for (const th of document.querySelectorAll('#steps th')) th.querySelector('button').addEventListener('click', () => sortBy(th.dataset.key));
  $('sort-p99').addEventListener('click', () => { state.sortKey = 'p99_latency_us'; state.sortDir = -1; renderTable(); });
  $('pipeline-id').addEventListener('change', (e) => { state.pipelineId = e.target.value; refreshAll(); });
  $('variant').addEventListener('change', (e) => { state.variant = e.target.value; refreshAll(); });
  $('range').addEventListener('change', refreshTrends);
  $('figure').addEventListener('change', refreshTrends);
  $('trends-refresh').addEventListener('click', refreshTrends);
  $('flame-form').addEventListener('submit', drawFlame);
  $('canary-form').addEventListener('submit', (e) => {
    canary.token = $('canary-token').value;
    sessionStorage.setItem('proxy.controlToken', canary.token);
    if (canary.widget) { canary.widget.close(); canary.widget = null; }
    e.preventDefault();
    loadCanaries().then(() => { if ($('canary-select').value) showCanary(); });
  });
  $('canary-all').addEventListener('change', loadCanaries);
  $('auth').addEventListener('submit', (e) => {
    e.preventDefault();
    state.token = $('token').value;
    sessionStorage.setItem('proxy.token', state.token);
    $('auth').hidden = true;
    start();
  });

  function refreshAll() {
    refreshTable();
    if (!$('view-trends').hidden) refreshTrends();
    if (!$('view-flame').hidden) drawFlame();
  }

  let timer = null;
  async function start() {
    try {
      await loadGraphs();
    } catch (err) {
      if (!explain(err)) notice('Graphs: ' + err.message);
      return;
    }
    await refreshTable();
    if (timer === null) timer = setInterval(refreshTable, REFRESH_MS);
  }
  start();
})();
