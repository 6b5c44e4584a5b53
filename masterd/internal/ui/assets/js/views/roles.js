// Roles as a tree (eng → eng/ml): weights, quota guarantees and limits
// against what the quota counts, reservations, what is lent, frameworks.
import { h, link, bar } from '../dom.js';
import { href } from '../router.js';
import * as fmt from '../format.js';
import * as prom from '../prom.js';
import { problem, empty, table, section, command } from './common.js';

export default {
  title: 'Roles',
  sources() {
    // The quotas are read too: a token that may read (or write) quotas but
    // not roles still sees its quota tree.
    return { roles: '/v1/roles', frameworks: '/v1/frameworks', metrics: { path: '/metrics', text: true }, quotas: '/v1/quotas' };
  },
  render(route, r, ctx) {
    const out = [];
    let roles;
    if (r.roles.ok) {
      roles = r.roles.data.roles || [];
    } else if (r.roles.status === 403 && r.quotas.ok) {
      roles = rolesFromQuotas(r.quotas.data.quotas || []);
      out.push(h('div', { class: 'problem denied', 'data-problem': 'roles-from-quotas' },
        h('strong', {}, 'Permission denied: cannot read roles. '), r.roles.error.message || '',
        h('div', { class: 'hint' }, 'Shown instead: the quotas this token may read (GET /v1/quotas). Weights, allocations, reservations, lent resources and frameworks need read on role.')));
    } else {
      return problem(r.roles, 'roles');
    }
    const names = frameworkNames(r.frameworks);
    const consumption = consumptionOf(roles, ctx.metrics);
    if (route.id) out.push(detail(route.id, roles, names, consumption));
    if (!roles.length) {
      out.push(empty('No roles yet.', ['A role appears once a framework subscribes to it or a policy names it: ', command('PUT /v1/roles/{role}'), ' (a weight), ',
        command('PUT /v1/quotas/{role}'), ', ', command('PUT /v1/reservations/{name}'), ', or ', command('terraform apply'), '.']));
      return out;
    }
    out.push(section('Role tree', tree(roles, route.id, names, consumption)));
    // Roles built from quotas name no frameworks: their names are not missed.
    if (!r.frameworks.ok && r.roles.ok) out.push(problem(r.frameworks, 'frameworks (their names)'));
    if (consumption.estimated) {
      out.push(h('p', { class: 'hint', 'data-hint': 'consumption-estimated' },
        '≤: this server does not export allot_quota_consumed (it is not the leader, or the token may not read /metrics), so consumption is shown as at most allocated + offered + reserved of the role and its children.'));
    }
    return out;
  },
};

// rolesFromQuotas makes role entries of the quotas alone; partial marks
// that everything else about the role is not known.
function rolesFromQuotas(quotas) {
  return quotas.map((q) => ({ role: q.role, quota: { guarantees: q.guarantees, limits: q.limits }, partial: true }));
}

function frameworkNames(result) {
  const m = new Map();
  if (result.ok) for (const f of result.data.frameworks || []) m.set(f.id, f.name);
  return m;
}

// consumptionOf returns, per role with a quota, what the quota counts: the
// leader's allot_quota_consumed when this server exports it (allocated and
// offered resources plus reservations nothing is allocated from, of the
// role and its descendants); else an upper bound from the role list.
function consumptionOf(roles, metrics) {
  const byRole = new Map();
  let estimated = false;
  const samples = metrics ? prom.select(metrics.samples, 'allot_quota_consumed') : [];
  for (const s of samples) {
    if (!byRole.has(s.labels.role)) byRole.set(s.labels.role, {});
    byRole.get(s.labels.role)[s.labels.resource] = s.value;
  }
  for (const role of roles) {
    // Without the role list's allocations nothing bounds a partial role's
    // consumption: it stays unknown rather than reading as 0.
    if (!role.quota || role.partial || byRole.has(role.role)) continue;
    const sum = {};
    for (const other of roles) {
      if (other.role !== role.role && !other.role.startsWith(role.role + '/')) continue;
      for (const m of [other.allocated, other.offered, other.reserved]) {
        for (const [k, v] of Object.entries(m || {})) sum[k] = (sum[k] || 0) + v;
      }
    }
    byRole.set(role.role, { ...sum, estimated: true });
    estimated = true;
  }
  return { get: (name) => byRole.get(name), estimated };
}

// buildTree nests roles by their path; a parent no policy names (eng of
// eng/ml alone) is still a node, without data.
function buildTree(roles) {
  const byName = new Map(roles.map((r) => [r.role, r]));
  const nodes = new Map();
  const roots = [];
  const node = (name) => {
    let n = nodes.get(name);
    if (n) return n;
    n = { name, role: byName.get(name) || null, children: [] };
    nodes.set(name, n);
    const i = name.lastIndexOf('/');
    (i > 0 ? node(name.slice(0, i)).children : roots).push(n);
    return n;
  };
  for (const r of roles) node(r.role);
  const sort = (list) => {
    list.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    for (const n of list) sort(n.children);
  };
  sort(roots);
  const flat = [];
  const walk = (list, depth) => {
    for (const n of list) {
      flat.push({ ...n, depth });
      walk(n.children, depth + 1);
    }
  };
  walk(roots, 0);
  return flat;
}

function tree(roles, selected, names, consumption) {
  const columns = [
    { key: 'role', label: 'Role' },
    { key: 'weight', label: 'Weight', num: true },
    { key: 'quota', label: 'Quota: consumed of limit · guarantee', title: 'Bars: consumption against the limit; the tick marks the guarantee' },
    { key: 'allocated', label: 'Allocated' },
    { key: 'reserved', label: 'Reserved' },
    { key: 'lent', label: 'Lent', title: 'The part of the role\'s reservations other roles hold as revocable resources' },
    { key: 'frameworks', label: 'Frameworks' },
  ];
  const rows = buildTree(roles).map((n) => {
    const r = n.role;
    const leaf = n.name.slice(n.name.lastIndexOf('/') + 1);
    const roleCell = h('span', { class: 'tree depth-' + Math.min(n.depth, 6) },
      link(href('roles', n.name), n.depth ? leaf : n.name, { 'data-link': 'role', title: n.name }));
    if (!r) {
      return { attrs: { 'data-id': n.name, 'data-depth': n.depth, class: 'implicit' }, cells: { role: roleCell, weight: '—', quota: h('span', { class: 'muted' }, 'no policy of its own') } };
    }
    return {
      attrs: { 'data-id': n.name, 'data-depth': n.depth, class: n.name === selected ? 'selected' : null },
      cells: {
        role: roleCell,
        weight: fmt.num(r.weight),
        quota: r.quota ? quotaBars(r.quota, consumption.get(r.role)) : h('span', { class: 'muted' }, 'no quota'),
        allocated: fmt.resources(r.allocated),
        reserved: fmt.resources(r.reserved),
        lent: fmt.resources(r.lent),
        frameworks: r.partial ? '—' : frameworkLinks(r, names),
      },
    };
  });
  return table('roles', columns, rows);
}

function frameworkLinks(role, names) {
  if (!role.frameworks || !role.frameworks.length) return h('span', { class: 'muted' }, 'none');
  return h('span', { class: 'links' }, role.frameworks.map((id) =>
    link(href('tasks', '', { role: role.role, framework: id }), names.get(id) || id, { 'data-link': 'framework-tasks', 'data-framework': id, title: id })));
}

// quotaBars draws one bar per resource the quota names or the role
// consumes: filled to the consumption, scaled to the limit (or past the
// guarantee when there is none), with a tick at the guarantee.
function quotaBars(quota, consumed) {
  const g = quota.guarantees || {}, l = quota.limits || {};
  const known = consumed !== undefined && consumed !== null;
  const c = consumed || {};
  const names = fmt.resourceNames(g, l);
  if (!names.length) return h('span', { class: 'muted' }, 'empty quota');
  return h('div', { class: 'quota' }, names.map((n) => {
    const used = c[n] || 0;
    const limit = l[n];
    const guarantee = g[n];
    const scale = limit !== undefined ? limit : Math.max(guarantee || 0, used) * 1.25 || 1;
    const markers = guarantee ? [{ at: scale ? guarantee / scale : 0, class: 'guarantee', title: 'guarantee ' + fmt.amount(n, guarantee) }] : [];
    const over = limit !== undefined && used > limit;
    return h('div', { class: 'quota-line', 'data-resource': n },
      h('span', { class: 'quota-name' }, n),
      bar(scale ? used / scale : 0, { markers, over, title: `${fmt.amount(n, used)} consumed` }),
      h('span', { class: 'quota-text' },
        h('span', { 'data-field': 'consumed', title: known ? null : 'Not known: this token may read neither the roles nor /metrics' },
          known ? (c.estimated ? '≤ ' : '') + fmt.num(used) : '—'),
        ' of ', h('span', { 'data-field': 'limit' }, limit !== undefined ? fmt.amount(n, limit) : 'no limit'),
        guarantee !== undefined ? [' · guarantee ', h('span', { 'data-field': 'guarantee' }, fmt.amount(n, guarantee))] : null));
  }));
}

function detail(name, roles, names, consumption) {
  const r = roles.find((x) => x.role === name);
  const children = roles.filter((x) => x.role.startsWith(name + '/')).map((x) => x.role);
  if (!r) {
    return section('Role ' + name, h('div', { 'data-detail': 'role', 'data-id': name },
      children.length ? h('p', {}, 'No policy of its own; its children: ', children.map((c, i) => [i ? ', ' : '', link(href('roles', c), c)])) :
        empty(`No role ${name}.`, 'No framework, quota, weight or reservation names it.')));
  }
  const rows = [
    ['Weight', fmt.num(r.weight)],
    ['Lending limit', r.partial ? '—' : r.lending_limit ? fmt.resources(r.lending_limit) : 'none (idle reservations lend all)'],
    ['Quota guarantees', r.quota ? fmt.resources(r.quota.guarantees) : 'no quota'],
    ['Quota limits', r.quota ? fmt.resources(r.quota.limits) : 'no quota'],
    ['Consumed (quota)', r.quota ? consumedText(r.quota, consumption.get(r.role)) : '—'],
    ['Allocated', fmt.resources(r.allocated)],
    ['Offered', fmt.resources(r.offered)],
    ['Reserved', fmt.resources(r.reserved)],
    ['Lent', fmt.resources(r.lent)],
    ['Revocable in use', fmt.resources(r.revocable_allocated)],
  ];
  return section('Role ' + name, h('div', { class: 'detail', 'data-detail': 'role', 'data-id': name },
    h('dl', { class: 'facts' }, rows.map(([k, v]) => [h('dt', {}, k), h('dd', { 'data-field': fieldName(k) }, v)])),
    r.partial ? null : h('p', {}, 'Frameworks: ', r.frameworks && r.frameworks.length ? frameworkLinks(r, names) : 'none subscribed to this role', ' · ',
      link(href('frameworks', '', { role: name }), 'frameworks of this role'), ' · ',
      link(href('tasks', '', { role: name }), 'its tasks')),
    children.length ? h('p', {}, 'Children: ', children.map((c, i) => [i ? ', ' : '', link(href('roles', c), c)])) : null));
}

// consumedText is what the quota bars say, on one line: each resource the
// quota names, with the same ≤ when the figure is an upper bound (cpus ≤ 0
// · mem ≤ 0 MiB), so that the detail and the tree agree.
function consumedText(quota, consumed) {
  if (consumed === undefined || consumed === null) return '—';
  const names = fmt.resourceNames(quota.guarantees, quota.limits);
  if (!names.length) return 'none';
  const bound = consumed.estimated ? '≤ ' : '';
  return names.map((n) => (n + ' ' + bound + fmt.amount(n, consumed[n] || 0)).replace(/ /g, '\u00a0')).join(' · ');
}

// fieldName is a detail row's data-field: "Consumed (quota)" → consumed-quota.
function fieldName(label) {
  return label.toLowerCase().replace(/[^a-z]+/g, '-').replace(/^-|-$/g, '');
}
