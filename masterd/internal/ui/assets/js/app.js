// The allot web UI: one page, one view at a time (chosen by the URL's hash),
// refreshed by polling the API every few seconds while the tab is visible.
import { h, replace } from './dom.js';
import * as api from './api.js';
import * as router from './router.js';
import * as fmt from './format.js';
import * as prom from './prom.js';
import cluster from './views/cluster.js';
import roles from './views/roles.js';
import agents from './views/agents.js';
import frameworks from './views/frameworks.js';
import tasks from './views/tasks.js';
import ratelimits from './views/ratelimits.js';
import audit from './views/audit.js';

const views = { cluster, roles, agents, frameworks, tasks, ratelimits, audit };

// Every 2 s: live enough to watch tasks start, light enough for a server
// (4 reads at most per view).
const refreshMs = 2000;

const el = {
  view: document.getElementById('view'),
  banner: document.getElementById('banner'),
  fetched: document.getElementById('fetched'),
  whoami: document.getElementById('whoami'),
  tokenBox: document.getElementById('token-box'),
  tokenForm: document.getElementById('token-form'),
  tokenInput: document.getElementById('token-input'),
  tokenReason: document.getElementById('token-reason'),
  tokenButton: document.getElementById('token-button'),
  tokenForget: document.getElementById('token-forget'),
};

const state = {
  route: null,
  view: null,
  content: null, // the part of the view each refresh replaces
  timer: null,
  abort: null,
  generation: 0,
  lastData: null, // Date of the last answer with data
  renders: 0,
  tokenBoxFor: null, // 'auth' (the API asked) or 'user' (the button)
  rates: new prom.Rates(), // from successive /metrics scrapes
};

function start() {
  window.addEventListener('hashchange', route);
  window.addEventListener('allot:refresh', () => refresh());
  document.addEventListener('visibilitychange', () => {
    // A hidden tab does not poll; it catches up the moment it is shown.
    if (document.hidden) stop();
    else refresh();
  });
  el.tokenForm.addEventListener('submit', (e) => {
    e.preventDefault();
    useToken(el.tokenInput.value.trim());
  });
  el.tokenForget.addEventListener('click', () => useToken(''));
  el.tokenButton.addEventListener('click', () => {
    if (el.tokenBox.hidden) showTokenBox('user', api.token() ? 'This tab has a token. Enter another one, or forget it.' : 'This tab has no token.');
    else hideTokenBox();
  });
  setInterval(showFetched, 1000);
  whoami();
  route();
}

function useToken(value) {
  api.setToken(value);
  el.tokenInput.value = '';
  hideTokenBox();
  // What one token could read another may not: start the trail afresh.
  for (const v of Object.values(views)) if (v.reset) v.reset();
  state.rates = new prom.Rates();
  whoami();
  route();
}

function showTokenBox(why, message) {
  state.tokenBoxFor = why;
  el.tokenReason.textContent = message;
  el.tokenBox.dataset.reason = why;
  if (el.tokenBox.hidden) {
    el.tokenBox.hidden = false;
    el.tokenInput.focus();
  }
}

function hideTokenBox() {
  el.tokenBox.hidden = true;
  state.tokenBoxFor = null;
}

async function whoami() {
  const r = await api.get('/v1/acl/token/self');
  if (r.ok) {
    replace(el.whoami, 'as ', h('strong', { title: 'token ' + r.data.accessor }, r.data.principal));
  } else {
    replace(el.whoami);
  }
}

// route builds the frame of the view the hash names, then fills it.
function route() {
  state.route = router.parse(location.hash);
  state.view = views[state.route.view] || null;
  for (const a of document.querySelectorAll('#nav a')) {
    a.classList.toggle('active', a.dataset.route === state.route.view);
  }
  el.view.dataset.view = state.route.view;
  el.view.dataset.state = 'loading';
  document.title = (state.view ? state.view.title : 'Not found') + ' · allot';
  if (!state.view) {
    stop();
    replace(el.view, h('h1', {}, 'Not found'), h('p', {}, `There is no view “${state.route.view}”. `, h('a', { href: router.href('cluster') }, 'Go to the cluster')));
    el.view.dataset.state = 'ready';
    return;
  }
  const controls = state.view.controls ? state.view.controls(state.route, go) : null;
  state.content = h('div', { class: 'content' }, h('p', { class: 'loading' }, 'Loading…'));
  replace(el.view, h('div', { class: 'view-head' }, h('h1', {}, heading()), controls), state.content);
  refresh();
}

function heading() {
  const { view, id } = state.route;
  return id ? [h('a', { href: router.href(view) }, state.view.title), ' / ', id] : state.view.title;
}

// go moves to another route (filters change the hash, so a filtered list
// can be shared and the Back button works).
function go(hash) {
  if (hash !== location.hash) location.hash = hash;
  else route();
}

function stop() {
  clearTimeout(state.timer);
  state.timer = null;
}

async function refresh() {
  stop();
  if (!state.view) return;
  if (state.abort) state.abort.abort();
  const abort = new AbortController();
  state.abort = abort;
  const generation = ++state.generation;
  const sources = Object.entries(state.view.sources(state.route));
  let results;
  try {
    const answers = await Promise.all(sources.map(([, src]) =>
      api.get(typeof src === 'string' ? src : src.path, { text: typeof src !== 'string' && src.text, signal: abort.signal })));
    results = Object.fromEntries(sources.map(([key], i) => [key, answers[i]]));
  } catch {
    return; // aborted: a newer refresh is under way
  }
  if (generation !== state.generation) return;
  show(results);
  if (!document.hidden) state.timer = setTimeout(refresh, refreshMs);
}

// show renders the answers, or says why there is nothing to render.
function show(results) {
  const list = Object.values(results);
  const now = new Date();

  if (list.some((r) => r.unreachable)) {
    const e = list.find((r) => r.unreachable).error;
    banner('unreachable', `Cannot reach masterd at ${location.origin} (${e.message}). Retrying every ${refreshMs / 1000} s` +
      (state.lastData ? `; the page shows data from ${fmt.clock(state.lastData)}.` : '.'));
    showFetched();
    return;
  }

  const unauthenticated = list.find((r) => r.status === 401);
  if (unauthenticated) {
    showTokenBox('auth', `The server asks for a token: ${unauthenticated.error.message}`);
    if (list.every((r) => r.status === 401)) {
      replace(state.content, h('div', { class: 'empty', 'data-empty': 'token' },
        h('p', { class: 'empty-title' }, 'This server needs a token.'),
        h('p', {}, 'Enter one above; ask your operator for a token whose policies grant read on what you want to see.')));
      el.view.dataset.state = 'unauthenticated';
      banner(null);
      showFetched();
      return;
    }
  } else if (state.tokenBoxFor === 'auth') {
    hideTokenBox();
  }

  const noLeader = list.find((r) => r.error && r.error.code === 'no_leader');
  const clusterAnswer = results.cluster && results.cluster.ok ? results.cluster.data : null;
  if (noLeader) banner('no-leader', `No leader: ${noLeader.error.message.replace(/[.\s]+$/, '')}. What only the leader knows cannot be shown until the servers elect one.`);
  else if (clusterAnswer && !clusterAnswer.leader) banner('no-leader', 'No leader: the servers have not elected one. What only the leader knows cannot be shown until they do.');
  else banner(null);

  let metrics = null;
  if (results.metrics && results.metrics.ok) {
    const samples = prom.parse(results.metrics.data);
    state.rates.update(samples, now.getTime());
    metrics = { samples };
  }
  if (list.some((r) => r.ok)) state.lastData = now;

  const ctx = { origin: location.origin, now, metrics, rates: state.rates };
  let nodes;
  try {
    nodes = state.view.render(state.route, results, ctx);
  } catch (err) {
    console.error(err);
    nodes = h('div', { class: 'problem' }, h('strong', {}, 'This view failed to show the answer: '), String(err && err.message ? err.message : err));
  }
  replace(state.content, nodes);
  el.view.dataset.state = 'ready';
  el.view.dataset.renders = String(++state.renders);
  showFetched();
}

function banner(kind, message) {
  if (!kind) {
    el.banner.hidden = true;
    delete el.banner.dataset.kind;
    return;
  }
  el.banner.dataset.kind = kind;
  el.banner.textContent = message;
  el.banner.hidden = false;
}

function showFetched() {
  if (!state.lastData) {
    el.fetched.textContent = 'not fetched yet';
    return;
  }
  const age = (Date.now() - state.lastData.getTime()) / 1000;
  const stale = age > (3 * refreshMs) / 1000;
  el.fetched.textContent = stale ? `data from ${fmt.clock(state.lastData)} (${fmt.duration(age)} ago)` : `updated ${fmt.clock(state.lastData)}`;
  el.fetched.classList.toggle('stale', stale);
  el.fetched.title = document.hidden ? 'paused while the tab is hidden' : `refreshes every ${refreshMs / 1000} s`;
}

start();
