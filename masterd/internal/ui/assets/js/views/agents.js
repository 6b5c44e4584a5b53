// Agents: what each has, what is allocated on it, what it can lend, and
// whether it is connected.
import { h, link, bar } from '../dom.js';
import { href } from '../router.js';
import * as fmt from '../format.js';
import { problem, empty, table, section, command } from './common.js';
import { taskTable } from './tasks.js';

export default {
  title: 'Agents',
  sources(route) {
    const s = { agents: '/v1/agents', tasks: '/v1/tasks' };
    if (route.id) s.frameworks = '/v1/frameworks';
    return s;
  },
  render(route, r, ctx) {
    if (!r.agents.ok) return problem(r.agents, 'agents');
    const agents = r.agents.data.agents || [];
    const tasks = r.tasks.ok ? r.tasks.data.tasks || [] : null;
    const out = [];
    if (route.id) out.push(detail(route.id, agents, tasks, r, ctx));
    if (!agents.length) {
      out.push(empty('No agents.', ['Start agentd on each host: ', command(`agentd -master ${ctx.origin} -name node-1 -work-dir /var/lib/allot/agent`)],
        ['With ACLs on, give it a token whose policy grants agent register: ', command('-token-file FILE'), '.']));
      return out;
    }
    out.push(section(`${agents.length} agent${agents.length === 1 ? '' : 's'}`, list(agents, tasks, route.id)));
    if (!r.tasks.ok) out.push(problem(r.tasks, 'tasks (the counts per agent)'));
    return out;
  },
};

function list(agents, tasks, selected) {
  const names = fmt.resourceNames(...agents.map((a) => a.resources));
  const columns = [
    { key: 'agent', label: 'Agent' },
    { key: 'status', label: 'Status' },
    ...names.map((n) => ({ key: 'res-' + n, label: n + (fmt.unit(n) ? ` (${fmt.unit(n)})` : ''), group: 'Allocated of total', num: true })),
    { key: 'reserved', label: 'Reserved' },
    { key: 'revocable', label: 'Revocable', title: 'What the agent can lend now: usage slack and idle reservations' },
    { key: 'revocable_allocated', label: 'Revocable in use' },
    { key: 'capabilities', label: 'Capabilities' },
    { key: 'tasks', label: 'Tasks', num: true },
  ];
  const sorted = [...agents].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  return table('agents', columns, sorted.map((a) => {
    const cells = {
      agent: h('span', { class: 'stack' }, link(href('agents', a.id), a.name || a.id, { 'data-link': 'agent' }), h('small', {}, a.id + (a.hostname && a.hostname !== a.name ? ' · ' + a.hostname : ''))),
      status: a.connected ? h('span', { class: 'badge ok' }, 'connected') : h('span', { class: 'badge bad' }, 'disconnected'),
      reserved: fmt.resources(a.reserved),
      revocable: fmt.resources(a.revocable),
      revocable_allocated: fmt.resources(a.revocable_allocated),
      capabilities: capabilities(a.capabilities),
      tasks: tasks ? link(href('tasks', '', { agent: a.id }), String(tasks.filter((t) => t.agent_id === a.id).length)) : '—',
    };
    for (const n of names) cells['res-' + n] = usage(a, n);
    return { attrs: { 'data-id': a.id, class: a.id === selected ? 'selected' : null }, cells };
  }));
}

// usage is "allocated / total" over a bar.
function usage(a, name) {
  const total = (a.resources || {})[name] || 0;
  const used = (a.allocated || {})[name] || 0;
  return h('span', { class: 'usage' }, h('span', {}, `${fmt.num(used)} / ${fmt.num(total)}`), bar(total ? used / total : 0));
}

function capabilities(list) {
  if (!list || !list.length) return h('span', { class: 'muted' }, 'none');
  return h('span', { class: 'tags' }, list.map((c) => h('span', { class: 'tag' }, c)));
}

function detail(id, agents, tasks, r, ctx) {
  const a = agents.find((x) => x.id === id);
  if (!a) return section('Agent ' + id, empty(`No agent ${id}.`, 'It is not in the registry: it never registered, or was removed.'));
  const rows = [
    ['ID', a.id], ['Name', a.name], ['Hostname', a.hostname],
    ['Connected', a.connected ? 'yes' : 'no'],
    ['Registered', fmt.time(a.registered_at)],
    ['Resources', fmt.resources(a.resources)],
    ['Allocated', fmt.resources(a.allocated)],
    ['Reserved', fmt.resources(a.reserved)],
    ['Revocable', fmt.resources(a.revocable)],
    ['Revocable in use', fmt.resources(a.revocable_allocated)],
    ['Capabilities', capabilities(a.capabilities)],
  ];
  const mine = tasks ? tasks.filter((t) => t.agent_id === id) : null;
  return section('Agent ' + (a.name || a.id), h('div', { class: 'detail', 'data-detail': 'agent', 'data-id': a.id },
    h('dl', { class: 'facts' }, rows.map(([k, v]) => [h('dt', {}, k), h('dd', { 'data-field': k.toLowerCase() }, v)])),
    h('h3', {}, 'Tasks on this agent'),
    mine === null ? problem(r.tasks, 'tasks') : mine.length ? taskTable(mine, r, ctx) : empty('No tasks on this agent.')));
}
