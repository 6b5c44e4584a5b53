// The audit trail's before/after bodies as a list of the fields that changed.

// Fields where the API gives an empty object a meaning of its own: a role's
// lending_limit of {} lends nothing, an absent one lends without a cap.
// Everywhere else (a quota's guarantees or limits, a resource map) {} and
// absent say the same, and the trail must not show one turning into the
// other as a change.
const emptyMeans = new Set(['lending_limit']);

// flatten maps every leaf of a JSON value to its dotted path: {"limits":
// {"cpus": 2}} → {"limits.cpus": 2}. Arrays are leaves (compared whole). An
// empty object is no leaf: it is the same as an absent one (but see
// emptyMeans).
export function flatten(value, prefix = '', out = {}) {
  if (value !== null && typeof value === 'object' && !Array.isArray(value)) {
    const keys = Object.keys(value);
    if (keys.length === 0) {
      if (emptyMeans.has(prefix)) out[prefix] = value;
      return out;
    }
    for (const k of keys) flatten(value[k], prefix ? prefix + '.' + k : k, out);
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
