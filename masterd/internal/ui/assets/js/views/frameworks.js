// Frameworks: who they run as, their roles, what they hold, their tasks.
import { h, link } from '../dom.js';
import { href } from '../router.js';
import * as fmt from '../format.js';
import { problem, empty, table, section, command } from './common.js';

export default {
  title: 'Frameworks',
  sources() {
    return { frameworks: '/v1/frameworks', tasks: '/v1/tasks' };
  },
  render(route, r, ctx) {
    if (!r.frameworks.ok) return problem(r.frameworks, 'frameworks');
    let fws = r.frameworks.data.frameworks || [];
    const role = route.params.role;
    if (role) fws = fws.filter((f) => (f.roles || []).includes(role));
    const tasks = r.tasks.ok ? r.tasks.data.tasks || [] : null;
    if (!fws.length) {
      return role ? empty(`No framework is subscribed to role ${role}.`, link(href('frameworks'), 'Show every framework'))
        : empty('No frameworks.', ['A framework subscribes through the scheduler API (', command('POST /v1/scheduler'), '). Try the example: ',
          command(`bin/framework -master ${ctx.origin} -role '*' -tasks 3`)]);
    }
    const columns = [
      { key: 'framework', label: 'Framework' },
      { key: 'principal', label: 'Principal' },
      { key: 'roles', label: 'Roles' },
      { key: 'status', label: 'Status' },
      { key: 'capabilities', label: 'Capabilities' },
      { key: 'allocated', label: 'Allocated' },
      { key: 'offered', label: 'Offered' },
      { key: 'tasks', label: 'Tasks', num: true, title: 'Running / known' },
    ];
    const sorted = [...fws].sort((a, b) => (a.name + a.id < b.name + b.id ? -1 : 1));
    const rows = sorted.map((f) => {
      const mine = tasks ? tasks.filter((t) => t.framework_id === f.id) : null;
      const suppressed = f.suppressed_roles || [];
      return {
        attrs: { 'data-id': f.id },
        cells: {
          framework: h('span', { class: 'stack' }, link(href('tasks', '', { framework: f.id, role }), f.name || f.id, { 'data-link': 'framework-tasks' }), h('small', { class: 'mono' }, f.id)),
          principal: f.principal + (f.label ? ` (label ${f.label})` : ''),
          roles: h('span', { class: 'links' }, (f.roles || []).map((ro) => link(href('roles', ro), ro, { 'data-link': 'role' }))),
          status: h('span', { class: 'stack' }, f.connected ? h('span', { class: 'badge ok' }, 'connected') : h('span', { class: 'badge bad' }, 'disconnected'),
            suppressed.length ? h('small', { title: 'Roles for which the framework asked for no offers (SUPPRESS)' }, 'suppressed: ' + suppressed.join(', ')) : null),
          capabilities: (f.capabilities || []).length ? h('span', { class: 'tags' }, f.capabilities.map((c) => h('span', { class: 'tag' }, c))) : h('span', { class: 'muted' }, 'none'),
          allocated: fmt.resources(f.allocated),
          offered: fmt.resources(f.offered),
          tasks: mine ? link(href('tasks', '', { framework: f.id }), `${mine.filter((t) => t.state === 'TASK_RUNNING').length} / ${mine.length}`) : '—',
        },
      };
    });
    const title = role ? `Frameworks of role ${role}` : `${fws.length} framework${fws.length === 1 ? '' : 's'}`;
    return [section(title, table('frameworks', columns, rows)), r.tasks.ok ? null : problem(r.tasks, 'tasks (the counts)')];
  },
};
