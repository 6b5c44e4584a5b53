// Pieces every view uses.
import { h } from '../dom.js';

// problem shows why a source could not be read. A 403 names what the token
// lacks (the API's message says which object, access and role).
export function problem(result, what) {
  const e = result.error || {};
  if (result.status === 403) {
    return h('div', { class: 'problem denied', 'data-problem': 'permission_denied' },
      h('strong', {}, `Permission denied: cannot read ${what}. `), e.message || '',
      h('div', { class: 'hint' }, 'Ask for a token whose policies grant this, or use another token (Token, top right).'));
  }
  if (e.code === 'no_leader') {
    return h('div', { class: 'problem', 'data-problem': 'no_leader' },
      h('strong', {}, `No leader: cannot read ${what}. `), e.message || '');
  }
  if (result.status === 401) {
    return h('div', { class: 'problem', 'data-problem': 'unauthenticated' },
      h('strong', {}, `Not signed in: cannot read ${what}. `), e.message || '');
  }
  return h('div', { class: 'problem', 'data-problem': e.code || 'error' },
    h('strong', {}, `Cannot read ${what}: `), [e.code, e.message].filter(Boolean).join(': '));
}

// empty is the state of a list with nothing in it, and what to do about it.
export function empty(title, ...lines) {
  return h('div', { class: 'empty', 'data-empty': '' }, h('p', { class: 'empty-title' }, title),
    lines.map((l) => (typeof l === 'string' ? h('p', {}, l) : Array.isArray(l) ? h('p', {}, l) : l)));
}

// table builds a table. columns: [{key, label, num, group}] (group makes a
// second header row above the columns that share it). rows: [{attrs, cells:
// {key: node|string}}]. Every cell carries data-col, which the browser test
// reads.
export function table(name, columns, rows) {
  const head = h('thead', {});
  if (columns.some((c) => c.group)) {
    const top = h('tr', { class: 'groups' });
    for (let i = 0; i < columns.length;) {
      const g = columns[i].group;
      let span = 1;
      while (i + span < columns.length && g && columns[i + span].group === g) span++;
      top.appendChild(h('th', { colspan: span > 1 ? span : null, class: g ? 'group' : null }, g || ''));
      i += span;
    }
    head.appendChild(top);
  }
  head.appendChild(h('tr', {}, columns.map((c) => h('th', { class: c.num ? 'num' : null, title: c.title }, c.label))));
  const body = h('tbody', {}, rows.map((r) => h('tr', r.attrs || {},
    columns.map((c) => h('td', { 'data-col': c.key, class: c.num ? 'num' : null }, r.cells[c.key] ?? '')))));
  return h('table', { class: 'grid', 'data-table': name }, head, body);
}

// card is a figure on the overview: a label, a big value, a line below.
export function card(label, value, sub, attrs) {
  return h('div', { class: 'card', ...attrs }, h('div', { class: 'card-label' }, label),
    h('div', { class: 'card-value' }, value), sub ? h('div', { class: 'card-sub' }, sub) : null);
}

// command shows a command line to copy.
export function command(text) {
  return h('code', { class: 'command' }, text);
}

// section is a titled block.
export function section(title, ...children) {
  return h('section', { class: 'block' }, h('h2', {}, title), children);
}

// sortBy returns a copy of list sorted by key(item), a string.
export function sortBy(list, key) {
  return [...list].sort((a, b) => {
    const x = key(a), y = key(b);
    return x < y ? -1 : x > y ? 1 : 0;
  });
}
