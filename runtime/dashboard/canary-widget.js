// Canary comparison widget (docs/dashboard.md#canary-widget): baseline vs candidate side by side,
// stage and traffic, each rollback rule with its value, threshold and sustained-duration counter,
// a warning indicator while a threshold is approached or breached, a shadow canary's divergence
// and latest diffs, fed by the control plane's WebSocket (GET /api/v1/canary/{id}/feed), optional
// promote / rollback buttons.
//
// Standalone: one script, no dependency, usable in any page:
//   <div id="canary"></div>
//   <script src="http://127.0.0.1:9091/dashboard/canary-widget.js"></script>
//   <script>
//     ProxyCanaryWidget.mount(document.getElementById('canary'), {
//       baseUrl: 'http://127.0.0.1:9092', canaryId: 'c-…', token: '…',
//       refreshInterval: 5000, showActions: true, theme: 'dark' });
//   </script>
'use strict';
(function (root) {
  const STYLE_ID = 'proxy-canary-widget-style';
  const CSS = `
.pcw { --bg:#fff; --fg:#1b1f24; --muted:#57606a; --line:#d0d7de; --head:#f6f8fa; --ok:#1a7f37; --warn-bg:#fff8c5; --warn-fg:#4d3800; --bad:#b42318;
  font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--fg); background: var(--bg);
  border: 1px solid var(--line); border-radius: 8px; padding: 14px 16px; max-width: 760px; }
.pcw.dark { --bg:#0d1117; --fg:#e6edf3; --muted:#9da7b3; --line:#30363d; --head:#161b22; --ok:#3fb950; --warn-bg:#3b2e00; --warn-fg:#f2cc60; --bad:#ff7b72; }
.pcw h2 { font-size: 16px; margin: 0 0 4px; }
.pcw h3 { font-size: 14px; margin: 12px 0 2px; }
.pcw .meta { color: var(--muted); margin: 0 0 10px; }
.pcw .state { display: inline-block; padding: 1px 8px; border-radius: 10px; font-weight: 600; border: 1px solid var(--line); }
.pcw .state.rolled_back { color: var(--bad); } .pcw .state.completed { color: var(--ok); }
.pcw table { border-collapse: collapse; width: 100%; margin: 8px 0; }
.pcw th, .pcw td { border-bottom: 1px solid var(--line); padding: 4px 8px; text-align: right; font-variant-numeric: tabular-nums; }
.pcw th:first-child, .pcw td:first-child { text-align: left; }
.pcw thead th { background: var(--head); }
.pcw table.diffs th, .pcw table.diffs td { text-align: left; }
.pcw .warn { background: var(--warn-bg); color: var(--warn-fg); border-radius: 6px; padding: 6px 10px; margin: 8px 0; }
.pcw td.breaching { color: var(--bad); font-weight: 600; } .pcw td.warning { color: var(--warn-fg); background: var(--warn-bg); font-weight: 600; }
.pcw .actions { display: flex; gap: 8px; margin-top: 10px; align-items: center; }
.pcw button { font: inherit; color: inherit; background: var(--head); border: 1px solid var(--line); border-radius: 6px; padding: 4px 12px; cursor: pointer; }
.pcw button:focus-visible { outline: 2px solid #0a58ca; outline-offset: 2px; }
.pcw button.danger { color: var(--bad); }
.pcw .msg { color: var(--muted); }
`;

  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === 'class') e.className = v;
      else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, v);
    }
    for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
    return e;
  }

  const num = (v, digits) => (v === null || v === undefined || Number.isNaN(v) ? '—' : Number(v).toLocaleString('en-US', { maximumFractionDigits: digits }));

  function mount(container, options) {
    const o = Object.assign({ refreshInterval: 5000, showActions: false, theme: 'light', token: '' }, options);
    // The feed takes 100..60000 ms (it refuses anything else): a refreshInterval outside is brought into the range.
    const asked = Math.round(Number(o.refreshInterval));
    const feedInterval = Number.isFinite(asked) ? Math.min(60000, Math.max(100, asked)) : 5000;
    if (!o.baseUrl || !o.canaryId) throw new Error('ProxyCanaryWidget.mount needs baseUrl and canaryId');
    if (!document.getElementById(STYLE_ID)) document.head.append(el('style', { id: STYLE_ID }, CSS));
    const base = o.baseUrl.replace(/\/$/, '');
    const root = el('section', { class: 'pcw' + (o.theme === 'dark' ? ' dark' : ''), 'aria-live': 'polite', 'aria-label': 'Canary ' + o.canaryId });
    container.replaceChildren(root);
    let socket = null, closed = false, last = null, retry = 1000, actionMsg = '', pending = null;

    function render(c) {
      last = c;
      const m = c.metrics || {};
      const b = m.baseline || {}, k = m.candidate || {};
      const rows = [
        ['Requests', b.requests, k.requests, 0],
        ['Error rate (%)', b.error_rate_pct, k.error_rate_pct, 3],
        ['P50 (ms)', b.latency_p50_ms, k.latency_p50_ms, 3],
        ['P95 (ms)', b.latency_p95_ms, k.latency_p95_ms, 3],
        ['P99 (ms)', b.latency_p99_ms, k.latency_p99_ms, 3],
      ];
      const rules = c.rules || [];
      const hot = rules.filter((r) => r.state === 'warning' || r.state === 'breaching');
      const ev = c.evaluation || {};
      const parts = [
        el('h2', {}, 'Canary ', c.canary_id, ' ', el('span', { class: 'state ' + c.status, 'data-status': c.status }, c.status)),
        el('p', { class: 'meta' },
          'pipeline ', c.pipeline_id, ' · stage ', el('span', { 'data-field': 'stage' }, String(c.current_stage)),
          Array.isArray(c.stages) ? ' of ' + c.stages.length : '',
          ' · traffic to candidate ', el('span', { 'data-field': 'traffic' }, c.traffic_pct + '%'),
          c.elapsed ? ' · running ' + c.elapsed : ''),
        el('table', { 'aria-label': 'Baseline and candidate' },
          el('thead', {}, el('tr', {}, el('th', { scope: 'col' }, ''), el('th', { scope: 'col' }, 'Baseline'), el('th', { scope: 'col' }, 'Candidate'))),
          el('tbody', {}, ...rows.map(([label, x, y, d]) => el('tr', {}, el('th', { scope: 'row' }, label), el('td', {}, num(x, d)),
            el('td', {}, num(y, d)))))),
      ];
      if (hot.length > 0) {
        parts.push(el('p', { class: 'warn', role: 'alert', 'data-field': 'warning' },
          '⚠ ', hot.map((r) => r.rule + ' ' + (r.state === 'breaching' ? 'breaching' : 'approaching its threshold') + ' ' +
            'for ' + (r.sustained_for || '0s')).join('; ')));
      }
      if (ev.result === 'inconclusive') {
        const w = ev.window_requests || {};
        parts.push(el('p', { class: 'msg' }, 'Inconclusive: too few requests in the last window (baseline ', num(w.baseline, 0), ', candidate ',
          num(w.candidate, 0), ').'));
      }
      if (c.shadow) parts.push(...shadowPart(c.shadow));
      parts.push(el('table', { 'aria-label': 'Rollback rules' },
        el('thead', {}, el('tr', {}, el('th', { scope: 'col' }, 'Rule'), el('th', { scope: 'col' }, 'Value'), el('th', { scope: 'col' }, 'Threshold'),
          el('th', { scope: 'col' }, 'Sustained for'))),
        el('tbody', {}, ...rules.map((r) => el('tr', { 'data-rule': r.rule },
          el('td', {}, r.rule), el('td', { class: r.state }, num(r.value, 3)), el('td', {}, num(r.threshold, 3)),
          el('td', { class: r.state }, r.sustained_for || '0s'))))));
      if (o.showActions) {
        const live = c.status === 'active' || c.status === 'paused';
        parts.push(el('div', { class: 'actions' },
          el('button', { type: 'button', 'data-action': 'promote', onclick: () => act('promote', {}), ...(live ? {} : { disabled: '' }) }, 'Promote'),
          el('button', { type: 'button', class: 'danger', 'data-action': 'rollback', onclick: () => {
            const reason = prompt('Reason for the rollback', 'rolled back from the dashboard');
            if (reason !== null) act('rollback', { reason });
          }, ...(live ? {} : { disabled: '' }) }, 'Roll back'),
          el('span', { class: 'msg', 'data-field': 'action-message' }, actionMsg)));
      }
      root.replaceChildren(...parts);
    }

    // A shadow canary: how much was shadowed, how much diverged (by kind), the candidate's step cost
    // against the baseline's on those requests, and the latest diffs (paths; values only when the
    // canary shows them).
    function shadowPart(sh) {
      const st = sh.stage || {};
      const kinds = Object.entries(sh.by_kind || {}).map(([k, n]) => k + ' ' + n).join(', ');
      const out = [
        el('h3', {}, 'Shadow'),
        el('p', { class: 'meta', 'data-field': 'shadow' },
          'shadowing ', el('span', { 'data-field': 'shadow-pct' }, sh.shadow_pct + '%'), ' of the baseline\'s requests · ',
          el('span', { 'data-field': 'shadow-sampled' }, num(sh.sampled, 0)), ' shadowed · ',
          el('span', { 'data-field': 'shadow-diverged' }, num(sh.diverged, 0)), ' diverged',
          sh.divergence_rate === null ? '' : ' (' + num(sh.divergence_rate * 100, 2) + '%)', kinds ? ' — ' + kinds : ''),
        el('p', { class: 'meta' }, 'steps P95 on this stage\'s shadowed requests: baseline ', num(st.baseline_steps_p95_ms, 3), ' ms, candidate ',
          num(st.candidate_steps_p95_ms, 3), ' ms'),
      ];
      const diffs = sh.latest_diffs || [];
      if (diffs.length > 0) {
        out.push(el('table', { class: 'diffs', 'aria-label': 'Latest diffs' },
          el('thead', {}, el('tr', {}, el('th', { scope: 'col' }, 'Kind'), el('th', { scope: 'col' }, 'Operation'), el('th', { scope: 'col' }, 'Namespace'),
            el('th', { scope: 'col' }, 'Paths'))),
          el('tbody', {}, ...diffs.map((d) => el('tr', { 'data-diff': d.kind },
            el('td', {}, d.kind), el('td', {}, d.op), el('td', {}, d.collection ? d.db + '.' + d.collection : d.db),
            el('td', {}, d.paths.length === 0 ? d.baseline + ' vs ' + d.candidate : d.paths.map((x) => x.path + (x.baseline !== undefined ||
              x.candidate !== undefined ? ' (' + (x.baseline ?? '—') + ' → ' + (x.candidate ?? '—') + ')' : '')).join(', ')))))));
      }
      return out;
    }

    function message(text) {
      root.replaceChildren(el('p', { class: 'msg', 'data-field': 'message' }, text));
    }

    async function act(what, body) {
      actionMsg = what === 'promote' ? 'promoting…' : 'rolling back…';
      if (last) render(last);
      try {
        const res = await fetch(base + '/api/v1/canary/' + encodeURIComponent(o.canaryId) + '/' + what, {
          method: 'POST',
          headers: Object.assign({ 'content-type': 'application/json' }, o.token ? { authorization: 'Bearer ' + o.token } : {}),
          body: JSON.stringify(body),
        });
        const r = await res.json().catch(() => ({}));
        actionMsg = res.ok ? (r.message || what + ' done') : (r.error ? r.error.code + ': ' + r.error.message : 'HTTP ' + res.status);
      } catch (e) {
        actionMsg = 'the control plane did not answer: ' + e.message;
      }
      if (last) render(last);
    }

    function connect() {
      pending = null;
      if (closed) return;
      const url = base.replace(/^http/, 'ws') + '/api/v1/canary/' + encodeURIComponent(o.canaryId) + '/feed?interval_ms=' + feedInterval
        + (o.token ? '&access_token=' + encodeURIComponent(o.token) : '');
      socket = new WebSocket(url);
      let opened = false;
      socket.onopen = () => { opened = true; };
      socket.onmessage = (e) => {
        retry = 1000;
        try { const msg = JSON.parse(e.data); if (msg.canary) render(msg.canary); } catch (err) { /* not ours */ }
      };
      socket.onclose = (e) => {
        if (closed) return;
        if (e.code === 4404) return message('No canary ' + o.canaryId + ' on this proxy.');
        if (opened) return reconnect();
        // Refused before the upgrade: the control plane answers a bad token (401) or an unknown
        // canary (404) in plain HTTP, which a browser's WebSocket does not show; ask the API why.
        fetch(base + '/api/v1/canary/' + encodeURIComponent(o.canaryId), { headers: o.token ? { authorization: 'Bearer ' + o.token } : {} })
          .then((res) => res.status, () => 0)
          .then((status) => {
            if (closed) return;
            if (status === 401) return message('The control plane refused the token.');
            if (status === 404) return message('No canary ' + o.canaryId + ' on this proxy.');
            reconnect();
          });
      };
    }

    function reconnect() {
      if (last === null) message('Connecting to the control plane…');
      pending = setTimeout(connect, retry);
      retry = Math.min(retry * 2, 30000);
    }
    message('Connecting to the control plane…');
    connect();
    return {
      // Also during a reconnect's back-off: a closed widget never opens another feed.
      close() {
        closed = true;
        if (pending !== null) clearTimeout(pending);
        if (socket) socket.close();
      },
      get status() { return last; },
    };
  }

  root.ProxyCanaryWidget = { mount };
})(typeof window !== 'undefined' ? window : globalThis);
