// The cluster: its servers, the leader, recovery after a failover, and the
// totals of every agent's resources.
import { h, link, bar } from '../dom.js';
import { href } from '../router.js';
import * as fmt from '../format.js';
import { problem, empty, table, card, section, command } from './common.js';

export default {
  title: 'Cluster',
  sources() {
    return { cluster: '/v1/cluster', agents: '/v1/agents', frameworks: '/v1/frameworks', tasks: '/v1/tasks' };
  },
  render(route, r, ctx) {
    if (!r.cluster.ok) return problem(r.cluster, 'the cluster');
    const c = r.cluster.data;
    // Recovery gets a block of its own only while it holds offers back.
    const recovering = c.leader && c.recovery && c.recovery.active;
    return [
      cards(c, r),
      recovering ? section('Recovery', recovery(c.recovery, ctx.now)) : null,
      section('Servers', servers(c)),
      section('Resources', totals(c, ctx)),
    ];
  },
};

function cards(c, r) {
  const servers = c.servers || [];
  const voters = servers.filter((s) => s.suffrage === 'voter').length;
  const out = [
    card('Leader', c.leader ? c.leader.id : 'none', c.leader ? c.leader.api_address : 'no leader elected', { 'data-card': 'leader' }),
    card('Servers', String(servers.length), `${voters} voting · store version ${c.store_version ?? '—'}`, { 'data-card': 'servers' }),
  ];
  out.push(recoveryCard(c));
  if (r.agents.ok) {
    const agents = r.agents.data.agents || [];
    const connected = agents.filter((a) => a.connected).length;
    out.push(card('Agents', `${connected} / ${agents.length}`,
      // The whole agentd command is under Resources and on the agents view.
      link(href('agents'), agents.length ? 'connected / admitted' : 'none yet: start agentd'),
      { 'data-card': 'agents' }));
  } else {
    out.push(card('Agents', '—', why(r.agents), { 'data-card': 'agents' }));
  }
  if (r.frameworks.ok) {
    const fws = r.frameworks.data.frameworks || [];
    out.push(card('Frameworks', `${fws.filter((f) => f.connected).length} / ${fws.length}`,
      link(href('frameworks'), 'connected / known'), { 'data-card': 'frameworks' }));
  } else {
    out.push(card('Frameworks', '—', why(r.frameworks), { 'data-card': 'frameworks' }));
  }
  if (r.tasks.ok) {
    const tasks = r.tasks.data.tasks || [];
    const running = tasks.filter((t) => t.state === 'TASK_RUNNING').length;
    out.push(card('Tasks running', String(running), link(href('tasks'), `of ${tasks.length} known`), { 'data-card': 'tasks' }));
  } else {
    out.push(card('Tasks running', '—', why(r.tasks), { 'data-card': 'tasks' }));
  }
  return h('div', { class: 'cards' }, out);
}

// why says in a few words why a card has no figure; the full message is
// its title.
function why(result) {
  const e = result.error || {};
  const short = result.status === 403 ? 'permission denied' : e.code === 'no_leader' ? 'no leader' : e.message;
  return h('span', { title: e.message }, short);
}

function recoveryCard(c) {
  const rec = c.recovery;
  if (!c.leader || !rec) return card('Recovery', '—', 'not known without a leader', { 'data-card': 'recovery' });
  if (!rec.active) {
    return card('Recovery', 'off', 'offers flow normally', { 'data-card': 'recovery' });
  }
  return card('Recovery', `${rec.reregistered} / ${rec.expected}`, 'agents re-registered; offers wait', { 'data-card': 'recovery', class: 'card warn' });
}

const byId = new Intl.Collator('en', { numeric: true });

function servers(c) {
  const list = c.servers || [];
  if (!list.length) return empty('This server knows no servers yet.', 'It has not joined a cluster: check its -join or -bootstrap flag.');
  const columns = [
    { key: 'id', label: 'ID' },
    { key: 'api', label: 'API address' },
    { key: 'raft', label: 'Raft address' },
    { key: 'suffrage', label: 'Suffrage' },
    { key: 'leader', label: 'Role' },
    { key: 'store', label: 'Store version', num: true, title: 'Newest store version the server runs (0 or —: not known)' },
  ];
  // By id, as people count them (m2 before m10), not in the API's order,
  // which moves as servers join and leave.
  const sorted = [...list].sort((a, b) => byId.compare(a.id, b.id));
  return table('servers', columns, sorted.map((s) => ({
    attrs: { 'data-id': s.id, class: s.leader ? 'leader' : null },
    cells: {
      id: s.id,
      api: s.api_address,
      raft: s.raft_address,
      suffrage: s.suffrage || '—',
      leader: s.leader ? h('span', { class: 'badge ok' }, 'leader') : 'follower',
      store: s.store_version ? String(s.store_version) : '—',
    },
  })));
}

function recovery(rec, now) {
  const progress = rec.expected > 0 ? rec.reregistered / rec.expected : 1;
  const figures = h('span', { 'data-field': 'recovery-progress' }, `${rec.reregistered} / ${rec.expected} agents re-registered`);
  const deadline = rec.deadline ? new Date(rec.deadline) : null;
  return h('div', { class: 'recovery', 'data-recovery': 'active' },
    h('p', {}, h('span', { class: 'badge warn' }, 'recovery'),
      ' A new leader waits for agents to re-register before it sends offers, so that quota guarantees are judged on the whole cluster.'),
    h('div', { class: 'recovery-bar' }, bar(progress, { title: `${Math.round(progress * 100)}%` }), figures),
    deadline ? h('p', {}, 'Offers resume by ', h('span', { 'data-field': 'recovery-deadline' }, fmt.time(deadline)),
      ` (in ${fmt.duration((deadline - now) / 1000)}) at the latest.`) : null);
}

function totals(c, ctx) {
  const cols = [
    ['total', 'Capacity', 'Total resources of the admitted agents'],
    ['allocated', 'Allocated', 'Held by launched tasks'],
    ['offered', 'Offered', 'In outstanding offers'],
    ['reserved', 'Reserved', 'Held by active reservations'],
    ['revocable', 'Revocable', 'What agents can lend now (oversubscription and idle reservations)'],
    ['revocable_allocated', 'Revocable in use', 'Revocable resources offered or in use'],
  ];
  const names = fmt.resourceNames(...cols.map(([k]) => c[k]));
  if (!names.length) {
    return empty('No resources: no agent has been admitted.', ['Start one: ', command(`agentd -master ${ctx.origin} -name node-1 -work-dir /var/lib/allot/agent`)]);
  }
  const columns = [{ key: 'resource', label: 'Resource' },
    ...cols.map(([key, label, title]) => ({ key, label, title, num: true })),
    { key: 'usage', label: 'Allocated of capacity' }];
  return table('totals', columns, names.map((n) => {
    const cells = { resource: n + (fmt.unit(n) ? ` (${fmt.unit(n)})` : '') };
    for (const [k] of cols) cells[k] = c[k] === null || c[k] === undefined ? '—' : fmt.num(c[k][n] ?? 0);
    const total = (c.total || {})[n] || 0;
    const used = c.allocated ? c.allocated[n] || 0 : null;
    cells.usage = used === null || !total ? '—' : bar(used / total, { title: `${fmt.num(used)} of ${fmt.num(total)}` });
    return { attrs: { 'data-id': n }, cells };
  }));
}
