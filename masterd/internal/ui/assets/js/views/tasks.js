// Tasks: state, reason, agent, and each task's requests and limits side by
// side ("Infinity" shown as ∞), filtered by state, role, agent, framework.
import { h, link } from '../dom.js';
import { href } from '../router.js';
import * as fmt from '../format.js';
import { problem, empty, table, section, command } from './common.js';

// Preset state filters; any other list of states given in the URL is kept.
const presets = [
  ['', 'any state'],
  [fmt.activeStates.join(','), 'active (staging, starting, running)'],
  [fmt.taskStates.filter((s) => !fmt.activeStates.includes(s) && s !== 'TASK_UNREACHABLE').join(','), 'ended'],
  ...fmt.taskStates.map((s) => [s, s]),
];

export default {
  title: 'Tasks',
  sources(route) {
    const q = new URLSearchParams();
    for (const k of ['state', 'role', 'agent']) if (route.params[k]) q.set(k, route.params[k]);
    const qs = q.toString();
    return { tasks: '/v1/tasks' + (qs ? '?' + qs : ''), frameworks: '/v1/frameworks', agents: '/v1/agents' };
  },
  controls(route, go) {
    const p = route.params;
    const state = h('select', { id: 'filter-state', 'aria-label': 'state' });
    const options = [...presets];
    if (p.state && !options.some(([v]) => v === p.state)) options.push([p.state, p.state]);
    for (const [v, label] of options) state.appendChild(h('option', { value: v, selected: v === (p.state || '') }, label));
    const role = h('input', { id: 'filter-role', type: 'text', placeholder: 'any role', value: p.role || '', spellcheck: 'false', size: 14 });
    const agent = h('select', { id: 'filter-agent', 'aria-label': 'agent' }, h('option', { value: '' }, 'any agent'));
    const framework = h('select', { id: 'filter-framework', 'aria-label': 'framework' }, h('option', { value: '' }, 'any framework'));
    // Until the lists arrive, the selected ids are options of their own.
    if (p.agent) agent.appendChild(h('option', { value: p.agent, selected: true }, p.agent));
    if (p.framework) framework.appendChild(h('option', { value: p.framework, selected: true }, p.framework));
    const apply = () => go(href('tasks', '', { state: state.value, role: role.value.trim(), agent: agent.value, framework: framework.value }));
    state.addEventListener('change', apply);
    agent.addEventListener('change', apply);
    framework.addEventListener('change', apply);
    role.addEventListener('change', apply);
    const clear = h('a', { href: href('tasks'), class: 'clear' }, 'clear filters');
    const form = h('form', { class: 'filters', id: 'task-filters' },
      h('label', {}, 'State ', state), h('label', {}, 'Role ', role), h('label', {}, 'Agent ', agent),
      h('label', {}, 'Framework ', framework), clear);
    // Enter in the role box applies the filters instead of submitting the form.
    form.addEventListener('submit', (e) => {
      e.preventDefault();
      apply();
    });
    return form;
  },
  render(route, r, ctx) {
    fillSelect('filter-agent', r.agents.ok ? (r.agents.data.agents || []).map((a) => [a.id, a.name || a.id]) : [], route.params.agent);
    fillSelect('filter-framework', r.frameworks.ok ? (r.frameworks.data.frameworks || []).map((f) => [f.id, `${f.name} (${f.id})`]) : [], route.params.framework);
    if (!r.tasks.ok) return problem(r.tasks, 'tasks');
    let tasks = r.tasks.data.tasks || [];
    if (route.params.framework) tasks = tasks.filter((t) => t.framework_id === route.params.framework);
    if (!tasks.length) {
      const filtered = Object.keys(route.params).length > 0;
      return empty(filtered ? 'No tasks match these filters.' : 'No tasks.',
        filtered ? link(href('tasks'), 'Show all tasks') : ['Tasks appear when a framework launches them. Try the example framework: ',
          command(`bin/framework -master ${ctx.origin} -role '*' -tasks 3 -command 'sleep 60' -limits 'cpus:1;mem:Infinity'`)]);
    }
    return section(`${tasks.length} task${tasks.length === 1 ? '' : 's'}`, taskTable(tasks, r, ctx));
  },
};

// fillSelect refreshes a filter's options, keeping the selection; it does
// nothing while the list is unchanged, so an open menu stays open.
function fillSelect(id, items, selected) {
  const el = document.getElementById(id);
  if (!el) return;
  if (selected && !items.some(([v]) => v === selected)) items.push([selected, selected]);
  items.sort((a, b) => (a[1] < b[1] ? -1 : a[1] > b[1] ? 1 : 0));
  const key = JSON.stringify(items);
  if (el.dataset.items === key) return;
  el.dataset.items = key;
  el.replaceChildren(el.options[0]);
  for (const [v, label] of items) el.appendChild(h('option', { value: v, selected: v === selected }, label));
}

// taskTable lists tasks; r may hold frameworks and agents for their names.
export function taskTable(tasks, r, ctx) {
  const fwNames = new Map(r.frameworks && r.frameworks.ok ? (r.frameworks.data.frameworks || []).map((f) => [f.id, f.name]) : []);
  const agentNames = new Map(r.agents && r.agents.ok ? (r.agents.data.agents || []).map((a) => [a.id, a.name]) : []);
  const extra = fmt.resourceNames(...tasks.map((t) => t.resources)).filter((n) => n !== 'cpus' && n !== 'mem');
  const columns = [
    { key: 'task', label: 'Task' },
    { key: 'framework', label: 'Framework' },
    { key: 'role', label: 'Role' },
    { key: 'agent', label: 'Agent' },
    { key: 'state', label: 'State' },
    { key: 'status', label: 'Reason · last message' },
    { key: 'cpus-request', label: 'request', group: 'CPUs', num: true },
    { key: 'cpus-limit', label: 'limit', group: 'CPUs', num: true },
    { key: 'mem-request', label: 'request', group: 'Mem (MiB)', num: true },
    { key: 'mem-limit', label: 'limit', group: 'Mem (MiB)', num: true },
    ...extra.map((n) => ({ key: n + '-request', label: n + (fmt.unit(n) ? ` (${fmt.unit(n)})` : ''), group: 'Other requests', num: true })),
  ];
  const sorted = [...tasks].sort((a, b) => {
    const x = a.framework_id + '\0' + a.task_id, y = b.framework_id + '\0' + b.task_id;
    return x < y ? -1 : x > y ? 1 : 0;
  });
  return table('tasks', columns, sorted.map((t) => {
    const res = t.resources || {};
    const lim = t.limits || {};
    const cells = {
      task: h('span', { class: 'stack' }, h('span', { class: 'mono' }, t.task_id),
        t.name && t.name !== t.task_id ? h('small', {}, t.name) : null,
        t.revocable ? h('span', { class: 'tag revocable', title: 'Runs on revocable resources: it may be evicted' }, 'revocable') : null),
      framework: link(href('tasks', '', { framework: t.framework_id }), fwNames.get(t.framework_id) || t.framework_id, { title: t.framework_id, 'data-link': 'framework' }),
      role: link(href('roles', t.role), t.role, { 'data-link': 'role' }),
      agent: link(href('agents', t.agent_id), agentNames.get(t.agent_id) || t.agent_id, { title: t.agent_id, 'data-link': 'agent' }),
      state: h('span', { class: fmt.stateClass(t.state) }, t.state),
      status: t.reason || t.message ? h('span', { class: 'stack' },
        t.reason ? h('span', { class: 'reason', 'data-field': 'reason' }, t.reason) : null,
        t.message ? h('small', { class: 'message', title: t.message, 'data-field': 'message' }, t.message) : null) : '—',
      'cpus-request': fmt.num(res.cpus ?? null),
      'cpus-limit': limitCell(lim.cpus, 'No limit set: no CPU quota; the task may use idle CPUs, weighted by its request'),
      'mem-request': fmt.num(res.mem ?? null),
      'mem-limit': limitCell(lim.mem, 'No limit set: the request is also the hard limit'),
    };
    for (const n of extra) cells[n + '-request'] = fmt.num(res[n] ?? null);
    return { attrs: { 'data-id': t.task_id, 'data-framework': t.framework_id }, cells };
  }));
}

function limitCell(v, none) {
  const text = fmt.limit(v);
  if (v === 'Infinity') return h('span', { class: 'infinite', title: 'Infinity: bursts as far as the agent has room' }, text);
  if (v === undefined || v === null) return h('span', { class: 'muted', title: none }, text);
  return text;
}
