// Rate limits: each principal's configured limit beside what its calls do
// now, from this server's counters (allot_framework_messages_*_total,
// allot_ratelimit_*): queue depth, and received / processed / rejected
// rates computed from successive scrapes of /metrics.
import { h } from '../dom.js';
import { href } from '../router.js';
import * as fmt from '../format.js';
import * as prom from '../prom.js';
import { problem, empty, table, section, command } from './common.js';

const counters = {
  received: 'allot_framework_messages_received_total',
  processed: 'allot_framework_messages_processed_total',
  rejected: 'allot_ratelimit_rejected_total',
  queue: 'allot_ratelimit_queue_depth',
};

export default {
  title: 'Rate limits',
  sources() {
    return { config: '/v1/ratelimits', metrics: { path: '/metrics', text: true }, cluster: '/v1/cluster?stale=true' };
  },
  render(route, r, ctx) {
    if (!r.config.ok) return problem(r.config, 'the rate-limit configuration');
    const cfg = r.config.data;
    const metrics = ctx.metrics;
    const rows = buildRows(cfg, metrics);
    const out = [];
    out.push(defaults(cfg));
    if (!rows.length) {
      out.push(empty('No principal is limited and none has called yet.',
        ['Limit one: ', command('PUT /v1/ratelimits/{principal} {"qps": 50, "burst": 10}'), ', or with the ', command('allot_rate_limit'), ' Terraform resource.']));
    } else {
      out.push(section('Principals', rateTable(rows, metrics, ctx, cfg)));
    }
    if (!r.metrics.ok) out.push(problem(r.metrics, '/metrics (the counters)'));
    else out.push(source(metrics, r.cluster, ctx));
    return out;
  },
};

// buildRows lists each principal (its calls over all labels) followed by
// its labels, for every principal a limit names or the counters have seen.
function buildRows(cfg, metrics) {
  const principals = new Map();
  const entry = (p) => {
    if (!principals.has(p)) principals.set(p, { principal: p, limit: null, labels: new Map() });
    return principals.get(p);
  };
  const labelEntry = (p, l) => {
    const e = entry(p);
    if (!e.labels.has(l)) e.labels.set(l, { principal: p, label: l, limit: null });
    return e.labels.get(l);
  };
  for (const l of cfg.limits || []) {
    if (l.label) labelEntry(l.principal, l.label).limit = l;
    else entry(l.principal).limit = l;
  }
  if (metrics) {
    for (const s of prom.select(metrics.samples, counters.received)) {
      if (s.labels.label) labelEntry(s.labels.principal, s.labels.label);
      else entry(s.labels.principal);
    }
  }
  const rows = [];
  for (const p of [...principals.keys()].sort()) {
    const e = principals.get(p);
    rows.push({ principal: p, label: null, limit: e.limit });
    for (const l of [...e.labels.keys()].sort()) rows.push(e.labels.get(l));
  }
  return rows;
}

function rateTable(rows, metrics, ctx, cfg) {
  const columns = [
    { key: 'principal', label: 'Principal' },
    { key: 'label', label: 'Label' },
    { key: 'qps', label: 'QPS', group: 'Limit', num: true },
    { key: 'burst', label: 'Burst', group: 'Limit', num: true },
    { key: 'capacity', label: 'Queue capacity', group: 'Limit', num: true },
    { key: 'queue', label: 'Queued now', num: true },
    { key: 'received-rate', label: 'Received', group: 'Rate', num: true },
    { key: 'processed-rate', label: 'Processed', group: 'Rate', num: true },
    { key: 'rejected-rate', label: 'Rejected', group: 'Rate', num: true },
    { key: 'received', label: 'Received', group: 'Total since server start', num: true },
    { key: 'processed', label: 'Processed', group: 'Total since server start', num: true },
    { key: 'rejected', label: 'Rejected', group: 'Total since server start', num: true },
  ];
  const principalLimits = new Map(rows.filter((row) => row.label === null).map((row) => [row.principal, row.limit]));
  return table('ratelimits', columns, rows.map((row) => {
    // A principal's row sums its series over every label: its limit caps
    // them all together. A label's row is that label's series alone.
    const match = row.label === null ? { principal: row.principal } : { principal: row.principal, label: row.label };
    const figure = (name) => {
      if (!metrics) return { total: null, rate: null };
      const series = prom.select(metrics.samples, name, match);
      if (!series.length) return { total: null, rate: null };
      let total = 0, rate = 0;
      for (const s of series) {
        total += s.value;
        const r = ctx.rates.rate(s);
        rate = rate === null || r === null ? null : rate + r;
      }
      return { total, rate };
    };
    const received = figure(counters.received), processed = figure(counters.processed);
    const rejected = figure(counters.rejected), queue = figure(counters.queue);
    const l = row.limit;
    const cells = {
      principal: principalName(row.principal, row.label === null),
      label: row.label === null ? '' : row.label,
      qps: l ? (l.qps === undefined || l.qps === null ? h('span', { class: 'muted', title: 'Counted, not throttled' }, 'unlimited') : fmt.num(l.qps))
        : noLimit(row, principalLimits.get(row.principal), cfg),
      burst: l && l.burst !== undefined ? fmt.num(l.burst) : '—',
      capacity: l && l.capacity !== undefined ? fmt.num(l.capacity) : '—',
      queue: fmt.num(queue.total),
      'received-rate': fmt.rate(received.rate),
      'processed-rate': fmt.rate(processed.rate),
      'rejected-rate': rejected.rate ? h('span', { class: 'bad' }, fmt.rate(rejected.rate)) : fmt.rate(rejected.rate),
      received: fmt.num(received.total),
      processed: fmt.num(processed.total),
      rejected: rejected.total ? h('span', { class: 'bad' }, fmt.num(rejected.total)) : fmt.num(rejected.total),
    };
    const id = row.label === null ? row.principal : row.principal + '/' + row.label;
    return { attrs: { 'data-id': id, class: row.label === null ? 'principal' : 'label-row' }, cells };
  }));
}

// principalName shows a principal; the server counts the calls that
// named none (scheduler calls of a framework without a principal, or of an
// unknown framework) under the empty principal "", which must not read as
// a blank cell.
function principalName(p, strong) {
  if (p === '') {
    return h('em', { class: 'muted', title: 'Scheduler calls that named no principal (the counters\' principal=""): frameworks that gave none, or calls for an unknown framework' }, '(no principal)');
  }
  return strong ? h('strong', {}, p) : h('span', { class: 'muted' }, p);
}

// noLimit says what caps the calls of a row no limit names: a series the
// counters still have after its limit was deleted must not read as if a
// limit existed.
function noLimit(row, principalLimit, cfg) {
  if (row.label !== null && principalLimit) {
    return h('span', { class: 'muted', 'data-limit': 'principal', title: `No limit names label ${row.label}: ${row.principal}'s own limit caps these calls with its other frameworks'` }, 'none (principal\'s)');
  }
  const who = row.label === null ? 'this principal' : `label ${row.label} nor its principal`;
  if (cfg.aggregate_default_qps !== undefined && cfg.aggregate_default_qps !== null) {
    return h('span', { class: 'muted', 'data-limit': 'default', title: `No limit names ${who}: the aggregate default (${fmt.num(cfg.aggregate_default_qps)} qps) caps these calls, shared with every such principal` }, 'none (default)');
  }
  return h('span', { class: 'muted', 'data-limit': 'none', title: `No limit names ${who}, and there is no aggregate default: counted, not throttled` }, 'none');
}

function defaults(cfg) {
  const qps = cfg.aggregate_default_qps;
  if (qps === undefined || qps === null) {
    return h('p', { class: 'note', 'data-field': 'default' }, 'No aggregate default: principals no limit names are counted, not throttled.');
  }
  return h('p', { class: 'note', 'data-field': 'default' }, 'Aggregate default, shared by every principal no limit names: ',
    h('strong', {}, `${fmt.num(qps)} qps`), `, burst ${fmt.num(cfg.aggregate_default_burst ?? null)}, queue capacity ${fmt.num(cfg.aggregate_default_capacity ?? null)}.`);
}

// source says whose counters these are: each server counts the calls it
// served itself, and scheduler calls are served by the leader.
function source(metrics, cluster, ctx) {
  const leading = prom.value(metrics.samples, 'allot_raft_leader') === 1;
  const window = ctx.rates.window ? ` Rates over the last ${fmt.num(Math.round(ctx.rates.window * 10) / 10)} s.` : ' Rates appear after the second scrape.';
  if (leading) return h('p', { class: 'hint', 'data-field': 'source' }, 'Counters of this server, the leader, which serves every scheduler call.' + window);
  const leader = cluster && cluster.ok && cluster.data.leader;
  return h('p', { class: 'hint', 'data-field': 'source' },
    'Counters of this server, a follower: they count only the calls it served itself. Frameworks call the leader',
    leader ? [': open ', h('a', { href: leader.api_address + '/ui/' + href('ratelimits') }, 'its UI'), ' for their traffic.'] : '.', window);
}
