/**
 * The console's page, style and app, served as they are (src/console/assets.ts). The app is plain
 * JavaScript on Preact (`h`, hooks): every payload is rendered as text by Preact, never as HTML, and
 * the page runs no inline script (its Content-Security-Policy forbids any). Kept as strings so the
 * TypeScript build ships them with the runtime.
 */

export const INDEX_HTML = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Holt console</title>
<link rel="stylesheet" href="/assets/app.css">
<script type="module" src="/assets/app.js"></script>
</head>
<body>
<div id="app" role="application" aria-busy="true">Loading…</div>
</body>
</html>
`;

export const APP_CSS = `
body { font-family: system-ui, Helvetica, Arial, sans-serif; margin: 0; color: #0f172a; background: #f8fafc; }
header { display: flex; gap: 1rem; align-items: baseline; padding: .75rem 1rem; background: #0f172a; color: #f8fafc; }
header h1 { font-size: 1.05rem; margin: 0; }
header .live { font-size: .8rem; color: #cbd5e1; }
main { padding: 1rem; }
.filters { display: flex; gap: .75rem; margin-bottom: .75rem; align-items: center; }
table { border-collapse: collapse; width: 100%; background: #fff; }
th, td { text-align: left; padding: .35rem .6rem; border-bottom: 1px solid #e2e8f0; font-size: .9rem; vertical-align: top; }
th { font-weight: 600; color: #334155; }
td.goal { max-width: 40rem; overflow-wrap: anywhere; white-space: pre-wrap; }
.status { padding: .05rem .45rem; border-radius: .3rem; font-size: .8rem; }
.status.running { background: #ffedd5; color: #9a3412; }
.status.completed { background: #d1fae5; color: #065f46; }
.status.failed { background: #fee2e2; color: #991b1b; }
:focus-visible { outline: 2px solid #2563eb; outline-offset: 2px; }
`;

// No backtick and no dollar-brace below: this is a template literal's text.
export const APP_JS = String.raw`
import { h, render } from '/assets/preact.js';
import { useEffect, useMemo, useState } from '/assets/hooks.js';

const STATUSES = ['all', 'running', 'completed', 'failed'];

function age(ms, now) {
  const s = Math.max(0, Math.round((now - ms) / 1000));
  if (s < 60) return s + 's';
  if (s < 3600) return Math.round(s / 60) + 'm';
  if (s < 86400) return Math.round(s / 3600) + 'h';
  return Math.round(s / 86400) + 'd';
}

function useWorkflows() {
  const [rows, setRows] = useState(new Map());
  const [conn, setConn] = useState('connecting');
  useEffect(() => {
    let source;
    let closed = false;
    const load = async () => {
      const r = await fetch('/api/workflows', { credentials: 'same-origin' });
      if (!r.ok) { setConn('refused (' + r.status + ')'); return false; }
      const body = await r.json();
      setRows(new Map(body.workflows.map((w) => [w.goalId, w])));
      return body.lastEventId;
    };
    load().then((after) => {
      if (after === false || closed) return;
      // The browser reconnects by itself and sends Last-Event-ID: the server replays what was missed,
      // or says reset when it cannot, and the list is read once more.
      source = new EventSource('/api/events?after=' + after);
      source.addEventListener('workflow', (e) => {
        const w = JSON.parse(e.data);
        setRows((m) => new Map(m).set(w.goalId, w));
      });
      source.addEventListener('reset', () => { load(); });
      source.onopen = () => setConn('live');
      source.onerror = () => setConn('reconnecting');
    });
    return () => { closed = true; if (source) source.close(); };
  }, []);
  return { rows, conn };
}

function useNow(everyMs) {
  const [now, setNow] = useState(Date.now());
  useEffect(() => {
    const t = setInterval(() => setNow(Date.now()), everyMs);
    return () => clearInterval(t);
  }, [everyMs]);
  return now;
}

function Filters(props) {
  return h('div', { class: 'filters', role: 'search' },
    h('label', null, 'Status ',
      h('select', { value: props.status, onChange: (e) => props.setStatus(e.target.value), 'aria-label': 'status' },
        STATUSES.map((s) => h('option', { value: s }, s)))),
    h('label', null, 'Find ',
      h('input', { type: 'search', value: props.text, placeholder: 'goal or type', onInput: (e) => props.setText(e.target.value), 'aria-label': 'find' })));
}

function WorkflowTable(props) {
  const now = useNow(5000);
  if (!props.rows.length) return h('p', { role: 'status' }, 'No workflow yet: start one with holt forage.');
  return h('table', { role: 'table', 'aria-label': 'workflows' },
    h('thead', null, h('tr', null, ['Goal', 'Type', 'Status', 'Artefacts', 'Reworks', 'Started', 'Updated', 'Trace'].map((c) => h('th', { scope: 'col' }, c)))),
    h('tbody', null, props.rows.map((w) =>
      h('tr', { key: w.goalId, 'data-goal': w.goalId, 'data-status': w.status },
        h('td', { class: 'goal' }, w.goal),
        h('td', null, w.goalType),
        h('td', null, h('span', { class: 'status ' + w.status }, w.endType ? w.status + ' (' + w.endType + ')' : w.status)),
        h('td', null, String(w.artefacts)),
        h('td', null, String(w.reworks)),
        h('td', null, age(w.startedAtMs, now) + ' ago'),
        h('td', null, age(w.updatedAtMs, now) + ' ago'),
        h('td', null, w.traceId || '')))));
}

function App() {
  const { rows, conn } = useWorkflows();
  const [status, setStatus] = useState('all');
  const [text, setText] = useState('');
  const shown = useMemo(() => {
    const t = text.trim().toLowerCase();
    return [...rows.values()]
      .filter((w) => status === 'all' || w.status === status)
      .filter((w) => !t || w.goal.toLowerCase().includes(t) || w.goalType.toLowerCase().includes(t))
      .sort((a, b) => b.updatedAtMs - a.updatedAtMs);
  }, [rows, status, text]);
  return h('div', null,
    h('header', null, h('h1', null, 'Holt console · Workflows'), h('span', { class: 'live', role: 'status', 'data-conn': conn }, conn)),
    h('main', null, h(Filters, { status, setStatus, text, setText }), h(WorkflowTable, { rows: shown })));
}

const root = document.getElementById('app');
root.textContent = '';
root.removeAttribute('aria-busy');
render(h(App, null), root);
`;
