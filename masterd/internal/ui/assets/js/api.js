// Calls to the masterd API that served this page, with the user's token.

const tokenKey = 'allot.token';

// The token lives in sessionStorage: it stays with this tab, survives a
// reload, and is gone when the tab closes.
export function token() {
  try {
    return sessionStorage.getItem(tokenKey) || '';
  } catch {
    return '';
  }
}

export function setToken(value) {
  try {
    if (value) sessionStorage.setItem(tokenKey, value);
    else sessionStorage.removeItem(tokenKey);
  } catch {
    // Storage refused (a private mode): the token lasts until reload.
  }
}

// get fetches path and never throws. It resolves to one of
//   {ok: true, status, data, index}                (data: parsed JSON, or text)
//   {ok: false, status, error: {code, message}}    (the API's error answer)
//   {ok: false, status: 0, unreachable: true, error: {code, message}}
export async function get(path, { text = false, signal } = {}) {
  const headers = { Accept: text ? 'text/plain' : 'application/json' };
  const t = token();
  if (t) headers.Authorization = 'Bearer ' + t;
  let resp;
  try {
    resp = await fetch(path, { headers, signal, cache: 'no-store', credentials: 'omit' });
  } catch (err) {
    if (signal && signal.aborted) throw err;
    return { ok: false, status: 0, unreachable: true, error: { code: 'unreachable', message: String(err.message || err) } };
  }
  let body;
  try {
    body = await resp.text();
  } catch (err) {
    return { ok: false, status: 0, unreachable: true, error: { code: 'unreachable', message: String(err.message || err) } };
  }
  if (resp.ok) {
    // index is the state's Raft index the answer reflects (X-Allot-Index),
    // null when the answer has none.
    const index = resp.headers.has('X-Allot-Index') ? Number(resp.headers.get('X-Allot-Index')) : null;
    if (text) return { ok: true, status: resp.status, data: body, index };
    try {
      return { ok: true, status: resp.status, data: JSON.parse(body), index };
    } catch {
      return { ok: false, status: resp.status, error: { code: 'bad_answer', message: `${path}: the answer is not JSON` } };
    }
  }
  return { ok: false, status: resp.status, error: errorOf(resp, body) };
}

// errorOf reads {"error": {"code", "message"}}; a proxy's HTML page or an
// empty body still gives a message that names the status.
function errorOf(resp, body) {
  try {
    const e = JSON.parse(body).error;
    if (e && typeof e.message === 'string') return { code: String(e.code || ''), message: e.message, details: e.details };
  } catch {
    // not JSON: fall through
  }
  return { code: 'http_' + resp.status, message: `${resp.status} ${resp.statusText}`.trim() };
}
