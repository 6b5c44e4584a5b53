// Building the page. Everything the API says goes in through text nodes and
// attributes, never through HTML parsing: principals, roles, audit bodies and
// task messages are user input, and the page must show them, not run them.

// h makes an element. attrs sets attributes (class, href, title, data-*…);
// a value of null, undefined or false leaves the attribute out. children are
// nodes or strings (made text nodes); null and undefined are skipped, arrays
// are flattened.
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name === 'style' || name.startsWith('on')) {
      // The CSP refuses inline styles and handlers; saying so here beats a
      // console message nobody reads.
      throw new Error(`h(${tag}): attribute ${name} is not allowed`);
    }
    el.setAttribute(name, value === true ? '' : String(value));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    if (Array.isArray(child)) append(el, child);
    else if (child instanceof Node) el.appendChild(child);
    else el.appendChild(document.createTextNode(String(child)));
  }
}

// replace swaps an element's children for new ones.
export function replace(el, ...children) {
  el.replaceChildren();
  append(el, children);
}

// link is an <a> to a route of this page (see router.js).
export function link(href, text, attrs) {
  return h('a', { ...attrs, href }, text);
}

// bar is a horizontal bar: fraction (0…1) of it filled, with optional
// markers at other fractions. Widths are set through the CSSOM, which the
// CSP allows (style attributes it does not).
export function bar(fraction, opts = {}) {
  const fill = h('span', { class: 'bar-fill' + (opts.over ? ' over' : '') });
  fill.style.width = pct(fraction);
  const el = h('span', { class: 'bar' + (opts.class ? ' ' + opts.class : ''), title: opts.title }, fill);
  for (const m of opts.markers || []) {
    const mark = h('span', { class: 'bar-mark ' + (m.class || ''), title: m.title });
    mark.style.left = pct(m.at);
    el.appendChild(mark);
  }
  return el;
}

function pct(f) {
  if (!Number.isFinite(f)) f = 0;
  return (Math.max(0, Math.min(1, f)) * 100).toFixed(2) + '%';
}
