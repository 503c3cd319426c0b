/**
 * The console's living agents page (served as /assets/life.js, imported by app.js): each agent that
 * lives, its tasks with a Cancel button for a session that may act, its messages in their labels, its
 * work items with their reports, its memories, the scheduler's decisions and the deliveries of outcomes. Everything is
 * text to Preact, never HTML.
 */

// No backtick and no dollar-brace below: this is a template literal's text.
export const LIFE_JS = String.raw`
import { h } from './preact.js';
import { useState } from './hooks.js';

function when(ms) {
  return ms ? new Date(ms).toISOString().replace('T', ' ').slice(0, 19) : '';
}

async function cancel(session, role, id) {
  const r = await fetch('api/living/' + encodeURIComponent(role) + '/tasks/' + id + '/cancel', {
    method: 'POST',
    credentials: 'same-origin',
    headers: { 'content-type': 'application/json', 'x-holt-csrf': session.csrf },
    body: '{}',
  });
  if (!r.ok) throw new Error((await r.text()).trim() || 'refused (' + r.status + ')');
}

function Tasks(props) {
  const [error, setError] = useState('');
  const a = props.agent;
  if (!a.tasks.length) return h('p', { class: 'muted' }, 'No open task.');
  return h('div', null,
    h('table', { role: 'table', 'aria-label': 'tasks of ' + a.role },
      h('thead', null, h('tr', null, ['Task', 'Kind', 'State', 'Deadline', 'What', ''].map((c) => h('th', { scope: 'col' }, c)))),
      h('tbody', null, a.tasks.map((t) =>
        h('tr', { key: t.id, 'data-task': t.id, 'data-state': t.state },
          h('td', null, t.id.slice(0, 8)),
          h('td', null, t.kind),
          h('td', null, t.state),
          h('td', null, t.deadlineMs ? when(t.deadlineMs) : 'none'),
          h('td', { class: 'goal' }, t.what),
          h('td', null, props.session.canAct && t.state === 'waiting'
            ? h('button', { type: 'button', 'data-act': 'cancel', 'aria-label': 'cancel task ' + t.id.slice(0, 8),
                onClick: () => cancel(props.session, a.role, t.id).catch((e) => setError(String(e.message))) }, 'Cancel')
            : null))))),
    error ? h('p', { class: 'error', role: 'alert' }, error) : null);
}

function Agent(props) {
  const a = props.agent;
  return h('article', { class: 'question', 'data-living': a.role, 'aria-label': 'living agent ' + a.role },
    h('header', null, h('strong', null, a.role), h('span', { class: 'status ' + (a.state === 'running' ? 'completed' : 'failed') }, a.state),
      h('span', { class: 'muted' }, a.lastMessageMs ? 'last message ' + when(a.lastMessageMs) : 'no message yet')),
    h('h3', null, 'Tasks'),
    h(Tasks, { agent: a, session: props.session }),
    h('h3', null, 'Messages'),
    a.messages.length ? h('ul', { 'aria-label': 'messages to ' + a.role }, a.messages.map((m) =>
      h('li', { key: m.id, 'data-message': m.id },
        h('span', { class: 'badge' }, m.labels.origin + ' · ' + m.labels.authority + (m.labels.priority ? ' · priority ' + m.labels.priority : '')),
        ' ', h('span', { class: 'muted' }, m.labels.surface + ' (' + m.labels.admission + ') ' + when(m.atMs)),
        m.body === null ? null : h('pre', { class: 'payload' }, m.body)))) : h('p', { class: 'muted' }, 'None.'),
    h('h3', null, 'Work items'),
    a.items.length ? h('ul', null, a.items.map((i) =>
      h('li', { key: i.id, 'data-item': i.id, 'data-state': i.state },
        h('strong', null, i.state), ' ', i.objective,
        i.report ? h('pre', { class: 'payload' }, i.report) : null))) : h('p', { class: 'muted' }, 'None.'),
    h('h3', null, 'Memories'),
    a.memories.length ? h('ul', { 'aria-label': 'memories of ' + a.role }, a.memories.map((m) =>
      h('li', { key: m.id, 'data-memory': m.id },
        h('span', { class: 'badge' }, m.kind + ' · ' + m.scope + ' · ' + m.authority),
        ' ', h('span', { class: 'muted' }, when(m.atMs) + (m.uses ? ', recalled ' + m.uses + ' time(s)' : '')),
        h('pre', { class: 'payload' }, m.body)))) : h('p', { class: 'muted' }, 'None.'),
    a.deliveries.length ? h('div', null, h('h3', null, 'Deliveries'), h('ul', null, a.deliveries.map((d) =>
      h('li', { key: d.id, 'data-delivery': d.status }, d.callback + ' (' + d.host + '): ' + d.status + ' after ' + d.attempts + ' attempt(s)' + (d.lastError ? ': ' + d.lastError : ''))))) : null,
    h('h3', null, 'Scheduler decisions'),
    h('ul', { class: 'muted' }, a.decisions.map((d, i) => h('li', { key: i }, when(d.atMs) + ' ' + d.decision + ': ' + d.why))));
}

export function Living(props) {
  if (!props.enabled) return h('p', { role: 'status' }, 'This console reads no Postgres, so it shows no living agents (holt console on a local instance does).');
  if (!props.living.length) return h('p', { role: 'status' }, 'No living agent yet.');
  return h('section', { 'aria-label': 'living agents' }, props.living.map((a) => h(Agent, { key: a.role, agent: a, session: props.session })));
}
`;
