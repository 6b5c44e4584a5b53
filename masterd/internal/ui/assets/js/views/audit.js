// The audit trail: every policy change, who made it, and what changed
// (the fields of the before and after bodies that differ).
import { h, link } from '../dom.js';
import { href } from '../router.js';
import * as fmt from '../format.js';
import { diff, show } from '../diff.js';
import { problem, empty, table, section } from './common.js';

const page = 100;

// The trail is read incrementally: the first poll reads it all (the server
// keeps the last 10000 entries), later ones the newest entry shown again
// and what is newer. A restore (PUT /v1/snapshot) replaces the trail with
// the backup's: the entry shown last is then gone or another, or the state's
// index (X-Allot-Index) is below it, and the trail is read again from the
// start.
let entries = [];
let after = 0;
let shown = page;

export function reset() {
  entries = [];
  after = 0;
  shown = page;
}

export default {
  title: 'Audit trail',
  reset,
  sources() {
    return { audit: '/v1/audit?after=' + (after > 0 ? after - 1 : 0) };
  },
  controls(route, go) {
    const q = h('input', { id: 'filter-audit', type: 'search', placeholder: 'principal, action or object', value: route.params.q || '', spellcheck: 'false', size: 28 });
    const apply = () => go(href('audit', '', { q: q.value.trim() }));
    q.addEventListener('change', apply);
    const form = h('form', { class: 'filters', id: 'audit-filters' }, h('label', {}, 'Filter ', q));
    form.addEventListener('submit', (e) => {
      e.preventDefault();
      apply();
    });
    return form;
  },
  render(route, r) {
    if (!r.audit.ok) {
      return entries.length ? [problem(r.audit, 'the newest audit entries'), trail(route)] : problem(r.audit, 'the audit trail');
    }
    const fresh = r.audit.data.entries || [];
    if (entries.length && replaced(entries[entries.length - 1], fresh, r.audit.index)) {
      reset();
      // After this render: the poll that made it has then set its timer,
      // which the new read replaces.
      setTimeout(() => window.dispatchEvent(new Event('allot:refresh')), 0);
      return h('p', { class: 'loading', 'data-reloading': 'audit' }, 'The audit trail was replaced (by a restore): reading it again…');
    }
    for (const e of fresh) {
      if (e.index > after) {
        entries.push(e);
        after = e.index;
      }
    }
    if (!entries.length) return empty('No policy changes yet.', 'Every write to quotas, roles, reservations, rate limits, ACLs, agents and servers lands here.');
    return trail(route);
  },
};

// replaced reports whether the trail is no longer the one shown: last
// (the newest entry shown) must come back first, and the state cannot be
// older than it.
function replaced(last, fresh, index) {
  if (index !== null && index !== undefined && index < last.index) return true;
  const again = fresh[0];
  return !again || again.index !== last.index || again.time !== last.time || again.principal !== last.principal ||
    again.action !== last.action || again.object !== last.object;
}

function trail(route) {
  const q = (route.params.q || '').toLowerCase();
  const matching = entries.filter((e) => !q || [e.principal, e.action, e.object].some((s) => String(s).toLowerCase().includes(q)));
  const newest = matching.slice(-shown).reverse();
  const columns = [
    { key: 'index', label: 'Index', num: true },
    { key: 'time', label: 'Time' },
    { key: 'principal', label: 'Principal' },
    { key: 'action', label: 'Action' },
    { key: 'object', label: 'Object' },
    { key: 'changes', label: 'Changes' },
  ];
  const rows = newest.map((e) => ({
    attrs: { 'data-id': String(e.index) },
    cells: {
      index: String(e.index),
      time: h('span', { title: e.time }, fmt.time(e.time)),
      principal: e.principal,
      action: e.action,
      object: objectLink(e),
      changes: changes(e),
    },
  }));
  const more = matching.length > newest.length
    ? h('button', { type: 'button', class: 'more', id: 'audit-more' }, `Show ${Math.min(page, matching.length - newest.length)} older`)
    : null;
  if (more) {
    more.addEventListener('click', () => {
      shown += page;
      more.disabled = true;
      more.textContent = 'Loading…';
      window.dispatchEvent(new Event('allot:refresh'));
    });
  }
  const title = `${matching.length} entr${matching.length === 1 ? 'y' : 'ies'}` + (q ? ` matching “${route.params.q}”` : '') + ', newest first';
  return section(title, matching.length ? table('audit', columns, rows) : empty('No entry matches the filter.'), more);
}

// objectLink leads from an entry to the view that shows its object now.
function objectLink(e) {
  const obj = String(e.object);
  const slash = obj.indexOf('/');
  const kind = slash < 0 ? obj : obj.slice(0, slash);
  const name = slash < 0 ? '' : obj.slice(slash + 1);
  const body = e.after || e.before || {};
  let to = null;
  switch (kind) {
    case 'quota': case 'role': to = href('roles', name); break;
    case 'reservation': to = body.role ? href('roles', body.role) : null; break;
    case 'ratelimit': case 'ratelimit_default': to = href('ratelimits'); break;
    case 'agent': to = body.id ? href('agents', body.id) : href('agents'); break;
    case 'framework': to = href('tasks', '', { framework: name }); break;
    case 'server': to = href('cluster'); break;
  }
  return to ? link(to, obj) : obj;
}

function changes(e) {
  const list = diff(e.before, e.after);
  const what = e.before === null || e.before === undefined ? 'created' : e.after === null || e.after === undefined ? 'deleted' : null;
  const lines = list.map((c) => {
    const attrs = { class: 'change ' + c.kind + (c.path === 'version' ? ' muted' : ''), 'data-path': c.path, 'data-kind': c.kind };
    if (c.kind === 'changed') return h('div', attrs, h('span', { class: 'path' }, c.path), ' ', h('span', { class: 'before' }, show(c.before)), ' → ', h('span', { class: 'after' }, show(c.after)));
    if (c.kind === 'added') return h('div', attrs, '+ ', h('span', { class: 'path' }, c.path), ' ', h('span', { class: 'after' }, show(c.after)));
    return h('div', attrs, '− ', h('span', { class: 'path' }, c.path), ' ', h('span', { class: 'before' }, show(c.before)));
  });
  // A created or deleted object lists all its fields: they wrap as one
  // paragraph rather than taking a line each.
  return h('div', { class: 'changes' + (what ? ' whole' : '') }, what ? h('span', { class: 'tag ' + what }, what) : null,
    lines.length ? lines : h('span', { class: 'muted' }, 'no field changed'));
}
