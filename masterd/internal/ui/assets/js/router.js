// Hash routes, so that a view can be linked to and shared:
//   #/cluster  #/roles  #/roles/eng/ml  #/agents  #/agents/ID
//   #/frameworks?role=eng  #/tasks?role=eng&framework=ID&state=TASK_RUNNING
//   #/ratelimits  #/audit?q=quota
// The first segment names the view; the rest of the path (slashes kept, as
// roles have them) is the object; the query holds filters.

export const defaultView = 'cluster';

// parse reads a location hash into {view, id, params}.
export function parse(hash) {
  let rest = (hash || '').replace(/^#\/?/, '');
  let query = '';
  const q = rest.indexOf('?');
  if (q >= 0) {
    query = rest.slice(q + 1);
    rest = rest.slice(0, q);
  }
  const segments = rest.split('/').filter((s) => s !== '').map(decode);
  const params = {};
  for (const pair of query.split('&')) {
    if (!pair) continue;
    const eq = pair.indexOf('=');
    const key = decode(eq < 0 ? pair : pair.slice(0, eq));
    const value = eq < 0 ? '' : decode(pair.slice(eq + 1));
    if (value !== '') params[key] = value;
  }
  return { view: segments[0] || defaultView, id: segments.slice(1).join('/'), params };
}

// href builds a hash route; params with empty values are left out, and
// slashes and commas stay readable (eng/ml, TASK_RUNNING,TASK_STAGING).
export function href(view, id, params) {
  let out = '#/' + view;
  if (id) out += '/' + id.split('/').map(encode).join('/');
  const pairs = Object.entries(params || {}).filter(([, v]) => v !== undefined && v !== null && v !== '');
  if (pairs.length) out += '?' + pairs.map(([k, v]) => encode(k) + '=' + encode(String(v))).join('&');
  return out;
}

function encode(s) {
  return encodeURIComponent(s).replace(/%2F/g, '/').replace(/%2C/g, ',');
}

function decode(s) {
  try {
    return decodeURIComponent(s.replace(/\+/g, ' '));
  } catch {
    return s; // a hand-edited URL with a stray %: show it as typed
  }
}
