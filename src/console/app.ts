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
<link rel="stylesheet" href="assets/app.css">
<script type="module" src="assets/app.js"></script>
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
nav button { background: none; border: 0; color: #cbd5e1; font: inherit; padding: .2rem .5rem; cursor: pointer; }
nav button[aria-selected="true"] { color: #fff; border-bottom: 2px solid #f8fafc; }
.question { background: #fff; border: 1px solid #e2e8f0; border-radius: .4rem; padding: .6rem .8rem; margin-bottom: .75rem; }
.question header { display: flex; gap: .6rem; align-items: baseline; background: none; color: inherit; padding: 0; }
.payload { white-space: pre-wrap; overflow-wrap: anywhere; font-family: ui-monospace, monospace; font-size: .85rem; background: #f1f5f9; padding: .5rem; }
.actions { display: flex; gap: .5rem; align-items: flex-start; }
.actions textarea, .actions input { flex: 1; font: inherit; }
.badge { background: #fef9c3; color: #854d0e; font-size: .75rem; padding: .05rem .4rem; border-radius: .3rem; }
.muted { color: #64748b; font-size: .8rem; }
.error { color: #991b1b; }
button.link { background: none; border: 0; padding: 0; color: #1d4ed8; cursor: pointer; font: inherit; text-align: left; }
img.graph { max-width: 100%; height: auto; background: #fff; border: 1px solid #e2e8f0; margin: .5rem 0; }
.bar-cell { width: 20%; }
.bar { display: inline-block; width: .5rem; height: .6rem; background: #2563eb; border-radius: .2rem; }
.viewer { margin-top: 1rem; }
header button.sign-out { margin-left: auto; background: none; border: 1px solid #cbd5e1; color: #f8fafc; border-radius: .3rem; cursor: pointer; font: inherit; }
form.sign-in { display: flex; flex-direction: column; gap: .5rem; max-width: 28rem; }
`;

// No backtick and no dollar-brace below: this is a template literal's text.
export const APP_JS = String.raw`
import { h, render } from './preact.js';
import { useEffect, useMemo, useState } from './hooks.js';
import { Living } from './life.js';

const STATUSES = ['all', 'running', 'completed', 'failed'];

function age(ms, now) {
  const s = Math.max(0, Math.round((now - ms) / 1000));
  if (s < 60) return s + 's';
  if (s < 3600) return Math.round(s / 60) + 'm';
  if (s < 86400) return Math.round(s / 3600) + 'h';
  return Math.round(s / 86400) + 'd';
}

// The lists, read once, then kept from the server's events (replayed after a drop, or a reset).
function useBoard() {
  const [workflows, setWorkflows] = useState(new Map());
  const [questions, setQuestions] = useState(new Map());
  const [agents, setAgents] = useState([]);
  const [living, setLiving] = useState({ living: [], enabled: false });
  const [session, setSession] = useState({ csrf: '', canAct: false });
  const [conn, setConn] = useState('connecting');
  useEffect(() => {
    let source;
    let closed = false;
    const get = async (path) => {
      const r = await fetch(path, { credentials: 'same-origin' });
      if (!r.ok) throw new Error('refused (' + r.status + ')');
      return r.json();
    };
    const load = async () => {
      const [w, q, a, l] = await Promise.all([get('api/workflows'), get('api/questions'), get('api/agents'), get('api/living')]);
      setLiving({ living: l.living, enabled: l.enabled });
      setWorkflows(new Map(w.workflows.map((x) => [x.goalId, x])));
      setQuestions(new Map(q.questions.map((x) => [x.id, x])));
      setAgents(a.agents);
      return Math.min(w.lastEventId, q.lastEventId, a.lastEventId, l.lastEventId);
    };
    Promise.all([get('api/session'), load()]).then(([s, after]) => {
      if (closed) return;
      setSession(s);
      source = new EventSource('api/events?after=' + after);
      source.addEventListener('workflow', (e) => {
        const w = JSON.parse(e.data);
        setWorkflows((m) => new Map(m).set(w.goalId, w));
      });
      source.addEventListener('question', (e) => {
        const c = JSON.parse(e.data);
        setQuestions((m) => {
          const next = new Map(m);
          if (c.open) next.set(c.question.id, c.question);
          else next.delete(c.id);
          return next;
        });
      });
      source.addEventListener('agents', (e) => setAgents(JSON.parse(e.data)));
      source.addEventListener('living', (e) => setLiving((x) => ({ living: JSON.parse(e.data), enabled: x.enabled })));
      source.addEventListener('reset', () => { load(); });
      source.onopen = () => setConn('live');
      source.onerror = () => setConn('reconnecting');
    }, (e) => setConn(String(e.message)));
    return () => { closed = true; if (source) source.close(); };
  }, []);
  return { workflows, questions, agents, living, session, conn };
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
        h('td', { class: 'goal' }, h('button', { type: 'button', class: 'link', onClick: () => props.open(w.goalId), 'aria-label': 'open workflow' }, w.goal || '(empty goal)')),
        h('td', null, w.goalType),
        h('td', null, h('span', { class: 'status ' + w.status }, w.endType ? w.status + ' (' + w.endType + ')' : w.status)),
        h('td', null, String(w.artefacts)),
        h('td', null, String(w.reworks)),
        h('td', null, age(w.startedAtMs, now) + ' ago'),
        h('td', null, age(w.updatedAtMs, now) + ' ago'),
        h('td', null, w.traceId || '')))));
}

function Workflows(props) {
  const [status, setStatus] = useState('all');
  const [text, setText] = useState('');
  const shown = useMemo(() => {
    const t = text.trim().toLowerCase();
    return [...props.workflows.values()]
      .filter((w) => status === 'all' || w.status === status)
      .filter((w) => !t || w.goal.toLowerCase().includes(t) || w.goalType.toLowerCase().includes(t))
      .sort((a, b) => b.updatedAtMs - a.updatedAtMs);
  }, [props.workflows, status, text]);
  return h('section', { 'aria-label': 'workflows' }, h(Filters, { status, setStatus, text, setText }), h(WorkflowTable, { rows: shown, open: props.open }));
}

function time(at) {
  return new Date(at).toISOString().slice(11, 19);
}

function ms(v) {
  if (v === undefined) return '';
  return v < 1000 ? v + ' ms' : (v / 1000).toFixed(1) + ' s';
}

// One workflow: its graph, the timeline of its artefacts (read again whenever its row changes), and
// one artefact's payload, as text.
function WorkflowDetail(props) {
  const [detail, setDetail] = useState(null);
  const [open, setOpen] = useState(null);
  const row = props.row;
  useEffect(() => {
    let gone = false;
    fetch('api/workflows/' + props.goal, { credentials: 'same-origin' })
      .then((r) => (r.ok ? r.json() : null))
      .then((d) => { if (!gone) setDetail(d); });
    return () => { gone = true; };
  }, [props.goal, row ? row.updatedAtMs : 0]);
  const show = async (id) => {
    const r = await fetch('api/artefacts/' + id, { credentials: 'same-origin' });
    setOpen(r.ok ? await r.json() : { id, payload: 'could not read it (' + r.status + ')' });
  };
  if (!detail) return h('p', { role: 'status' }, 'Loading the workflow…');
  const total = Math.max(1, ...detail.timeline.map((t) => t.offsetMs));
  return h('section', { 'aria-label': 'workflow', 'data-workflow': props.goal },
    h('p', null, h('button', { type: 'button', class: 'link', onClick: props.back }, '← all workflows')),
    h('h2', null, detail.workflow.goal),
    h('p', { class: 'muted' }, detail.workflow.status + (detail.workflow.endType ? ' (' + detail.workflow.endType + ')' : '') + ' · ' + detail.timeline.length + ' artefacts · ' + detail.workflow.reworks + ' rework(s)' + (detail.workflow.traceId ? ' · trace ' : ''),
      detail.workflow.traceId ? (detail.traceUrl
        ? h('a', { href: detail.traceUrl, target: '_blank', rel: 'noopener noreferrer', 'data-trace': detail.workflow.traceId }, detail.workflow.traceId)
        : detail.workflow.traceId) : null),
    h('img', { class: 'graph', alt: 'the workflow graph', src: 'api/workflows/' + props.goal + '/graph.svg?v=' + detail.workflow.updatedAtMs }),
    h('table', { role: 'table', 'aria-label': 'timeline' },
      h('thead', null, h('tr', null, ['At', 'Artefact', 'By', 'Claim', 'Then', ''].map((c) => h('th', { scope: 'col' }, c)))),
      h('tbody', null, detail.timeline.map((t) =>
        h('tr', { key: t.id, 'data-artefact': t.id, 'data-structural': t.structural },
          h('td', null, '+' + ms(t.offsetMs)),
          h('td', null, h('button', { type: 'button', class: 'link', onClick: () => show(t.id) }, t.type + (t.version > 1 ? ' v' + t.version : '')), ' ', h('span', { class: 'muted' }, t.structural)),
          h('td', null, t.role),
          h('td', null, t.claim ? t.claim.status + (t.claim.granted.length ? ' → ' + t.claim.granted.join(', ') : '') : '',
            t.claim && Object.keys(t.claim.bids || {}).length
              ? h('div', { class: 'muted', 'data-bids': '' }, 'bids: ' + Object.entries(t.claim.bids).map((b) => b[0] + ' ' + b[1]).join(', '))
              : null,
            t.steps ? h('details', { 'data-steps': t.id },
              h('summary', null, t.steps.length + ' model call(s) and tool run(s)'),
              h('ol', null, t.steps.map((x, i) => h('li', { key: i, 'data-step': x.kind },
                time(x.atMs) + ' ' + x.role + ' ' + (x.kind === 'model' ? 'model ' : 'tool ') + x.what + (x.detail ? ' (' + x.detail + ')' : '') + (x.error ? ': ' + x.error : ''))))) : null),
          h('td', null, ms(t.gapMs)),
          h('td', { class: 'bar-cell' }, h('span', { class: 'bar', style: { marginLeft: (100 * t.offsetMs / total) + '%' } })))))),
    open ? h('div', { class: 'viewer', role: 'region', 'aria-label': 'payload', 'data-open': open.id },
      h('h3', null, (open.type || '') + ' ' + open.id),
      open.structural_type === 'Failure' ? h(FailureView, { payload: open.payload }) : null,
      h('pre', { class: 'payload' }, open.payload)) : null);
}

// A Failure's fields on their own (its payload is Holt's JSON): the reason, its class and exit code,
// and its stderr and stdout as they were written, not as JSON escapes.
function FailureView(props) {
  let f;
  try { f = JSON.parse(props.payload); } catch { return null; }
  if (!f || typeof f !== 'object') return null;
  const text = (v) => (typeof v === 'string' ? v : '');
  return h('div', { class: 'failure', 'data-failure': '' },
    h('p', null, h('strong', null, text(f.reason) || 'failed'),
      f.error_class ? h('span', { class: 'badge' }, text(f.error_class)) : null,
      typeof f.exit_code === 'number' ? h('span', { class: 'muted' }, ' exit code ' + f.exit_code) : null),
    text(f.stderr) ? h('div', null, h('h4', null, 'stderr'), h('pre', { class: 'payload', 'data-stderr': '' }, text(f.stderr))) : null,
    text(f.stdout) ? h('div', null, h('h4', null, 'stdout'), h('pre', { class: 'payload' }, text(f.stdout))) : null);
}

async function post(session, id, text) {
  const r = await fetch('api/questions/' + id + '/answer', {
    method: 'POST',
    credentials: 'same-origin',
    headers: { 'content-type': 'application/json', 'x-holt-csrf': session.csrf },
    body: JSON.stringify({ text }),
  });
  if (!r.ok) throw new Error((await r.text()).trim() || 'refused (' + r.status + ')');
}

// What a question cites: each source artefact opened on demand (type, author, payload as text).
function Context(props) {
  const [open, setOpen] = useState({});
  if (!props.sources.length) return null;
  const show = async (id) => {
    const r = await fetch('api/artefacts/' + id, { credentials: 'same-origin' });
    const a = r.ok ? await r.json() : { payload: 'could not read it (' + r.status + ')' };
    setOpen((o) => Object.assign({}, o, { [id]: a }));
  };
  return h('div', { class: 'context', 'aria-label': 'context' },
    h('p', { class: 'muted' }, 'It cites:'),
    props.sources.map((id) => h('div', { key: id, 'data-source': id },
      open[id]
        ? h('div', null, h('span', { class: 'badge' }, (open[id].type || '') + (open[id].produced_by_role ? ' by ' + open[id].produced_by_role : '')),
            h('pre', { class: 'payload' }, open[id].payload))
        : h('button', { type: 'button', class: 'link', 'data-act': 'context', onClick: () => show(id) }, 'Show ' + id.slice(0, 8)))));
}

function QuestionCard(props) {
  const q = props.q;
  const [text, setText] = useState('');
  const [error, setError] = useState('');
  const [busy, setBusy] = useState(false);
  const send = async (answer) => {
    setBusy(true);
    setError('');
    try { await post(props.session, q.id, answer); } catch (e) { setError(String(e.message)); setBusy(false); }
  };
  const now = useNow(5000);
  const actions = !props.session.canAct
    ? h('p', { class: 'muted' }, 'Read-only: open the console with a link that may act to answer.')
    : q.approval
      ? h('div', { class: 'actions' },
          h('input', { type: 'text', value: text, placeholder: 'reason (for a rejection)', onInput: (e) => setText(e.target.value), 'aria-label': 'reason' }),
          h('button', { type: 'button', disabled: busy, onClick: () => send('approve'), 'data-act': 'approve' }, 'Approve'),
          h('button', { type: 'button', disabled: busy, onClick: () => send('reject ' + (text || 'rejected in the console')), 'data-act': 'reject' }, 'Reject'))
      : h('form', { class: 'actions', onSubmit: (e) => { e.preventDefault(); if (text.trim()) send(text); } },
          h('textarea', { value: text, rows: 3, onInput: (e) => setText(e.target.value), 'aria-label': 'answer' }),
          h('button', { type: 'submit', disabled: busy || !text.trim(), 'data-act': 'answer' }, 'Answer'));
  return h('article', { class: 'question', 'data-question': q.id, 'aria-label': 'question from ' + q.role },
    h('header', null, h('strong', null, q.role), q.approval ? h('span', { class: 'badge' }, 'approval of a tool call') : null, h('span', { class: 'muted' }, age(q.askedAtMs, now) + ' ago')),
    h('pre', { class: 'payload' }, q.text),
    h(Context, { sources: q.sources || [] }),
    actions,
    error ? h('p', { class: 'error', role: 'alert' }, error) : null);
}

function Questions(props) {
  const list = [...props.questions.values()].sort((a, b) => a.askedAtMs - b.askedAtMs);
  if (!list.length) return h('p', { role: 'status' }, 'No open question.');
  return h('section', { 'aria-label': 'questions' }, list.map((q) => h(QuestionCard, { key: q.id, q, session: props.session })));
}

function Agents(props) {
  const now = useNow(5000);
  if (!props.agents.length) return h('p', { role: 'status' }, 'No agent registered yet.');
  const num = (v) => (v === undefined ? '' : String(v));
  return h('table', { role: 'table', 'aria-label': 'agents' },
    h('thead', null, h('tr', null, ['Agent', 'Kind', 'In flight', 'State', 'Model', 'Calls', 'Tokens', 'Cost (USD)', 'Errors in a row', 'Life', 'Memories', 'Image', 'Last errors'].map((c) => h('th', { scope: 'col' }, c)))),
    h('tbody', null, props.agents.map((a) =>
      h('tr', { key: a.role, 'data-agent': a.role, 'data-state': a.state || '' },
        h('td', null, a.role),
        h('td', null, a.kind),
        h('td', null, String(a.inFlight)),
        h('td', null, a.state === 'paused'
          ? h('span', { class: 'status failed' }, 'paused' + (a.pausedClass ? ' (' + a.pausedClass + ')' : '') + (a.pausedReason ? ': ' + a.pausedReason : ''))
          : (a.state || '')),
        h('td', null, a.model || ''),
        h('td', null, num(a.calls)),
        h('td', null, num(a.tokens)),
        h('td', null, a.costUsd === undefined ? '' : a.costUsd.toFixed(4)),
        h('td', null, num(a.consecutiveErrors)),
        h('td', null, a.life || ''),
        h('td', null, num(a.memories)),
        h('td', { class: 'goal' }, a.image || ''),
        h('td', { class: 'goal' }, a.lastErrors.map((x) =>
          h('div', { class: 'agent-error' }, x.type + (x.errorClass ? ' [' + x.errorClass + ']' : '') + ', ' + age(x.atMs, now) + ' ago: ' + x.text)))))));
}

// A session of the sign-in form ends here (the console then shows the form again).
async function signOut(session) {
  await fetch('sign-out', { method: 'POST', credentials: 'same-origin', headers: { 'x-holt-csrf': session.csrf } });
  location.reload();
}

function App() {
  const board = useBoard();
  const [page, setPage] = useState('workflows');
  const [goal, setGoal] = useState(null);
  const tab = (name, label) =>
    h('button', { type: 'button', role: 'tab', 'aria-selected': String(page === name), 'data-page': name, onClick: () => setPage(name) }, label);
  return h('div', null,
    h('header', null,
      h('h1', null, 'Holt console'),
      h('nav', { role: 'tablist' }, tab('workflows', 'Workflows'), tab('questions', 'Questions (' + board.questions.size + ')'), tab('agents', 'Agents'), tab('living', 'Living agents')),
      h('span', { class: 'live', role: 'status', 'data-conn': board.conn, 'data-can-act': String(board.session.canAct) }, board.conn),
      board.session.signOut && h('button', { type: 'button', class: 'sign-out', 'data-act': 'sign-out', onClick: () => signOut(board.session) }, 'Sign out')),
    h('main', null, page === 'workflows' && goal
      ? h(WorkflowDetail, { goal, row: board.workflows.get(goal), back: () => setGoal(null) })
      : page === 'workflows'
      ? h(Workflows, { workflows: board.workflows, open: setGoal })
      : page === 'questions'
        ? h(Questions, { questions: board.questions, session: board.session })
        : page === 'living'
          ? h(Living, { living: board.living.living, enabled: board.living.enabled, session: board.session })
          : h(Agents, { agents: board.agents })));
}

const root = document.getElementById('app');
root.textContent = '';
root.removeAttribute('aria-busy');
render(h(App, null), root);
`;
