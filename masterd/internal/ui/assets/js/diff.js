// The audit trail's before/after bodies as a list of the fields that changed.

// flatten maps every leaf of a JSON value to its dotted path: {"limits":
// {"cpus": 2}} → {"limits.cpus": 2}. Arrays are leaves (compared whole), and
// so are empty objects, so that {} versus null still shows.
export function flatten(value, prefix = '', out = {}) {
  if (value !== null && typeof value === 'object' && !Array.isArray(value) && Object.keys(value).length > 0) {
    for (const [k, v] of Object.entries(value)) flatten(v, prefix ? prefix + '.' + k : k, out);
  } else if (prefix !== '') {
    out[prefix] = value;
  }
  return out;
}

// diff lists the changes from before to after, sorted by path:
// {path, kind: 'added' | 'removed' | 'changed', before, after}.
// A null or missing side is an object created (all added) or deleted (all
// removed).
export function diff(before, after) {
  const a = flatten(before ?? {});
  const b = flatten(after ?? {});
  const paths = [...new Set([...Object.keys(a), ...Object.keys(b)])].sort();
  const out = [];
  for (const path of paths) {
    const inA = Object.prototype.hasOwnProperty.call(a, path);
    const inB = Object.prototype.hasOwnProperty.call(b, path);
    if (inA && !inB) out.push({ path, kind: 'removed', before: a[path] });
    else if (!inA && inB) out.push({ path, kind: 'added', after: b[path] });
    else if (JSON.stringify(a[path]) !== JSON.stringify(b[path])) out.push({ path, kind: 'changed', before: a[path], after: b[path] });
  }
  return out;
}

// show writes one value of a diff line as JSON, so that "2" and 2, or
// "null" and null, read differently.
export function show(v) {
  return v === undefined ? '—' : JSON.stringify(v);
}
