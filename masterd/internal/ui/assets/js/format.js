// How numbers, resources, limits, states and times read on the page.

const numberFormat = new Intl.NumberFormat('en-US', { maximumFractionDigits: 3 });

// num writes an amount as the API keeps it (to 0.001) with thousands
// separators: 2048 → "2,048", 0.25 → "0.25". null and undefined are "—".
export function num(v) {
  if (v === null || v === undefined) return '—';
  if (typeof v !== 'number') return String(v);
  return numberFormat.format(v);
}

// Units of the resources allot knows; any other resource is a bare number.
const units = { mem: 'MiB', disk: 'MiB' };

export function unit(name) {
  return units[name] || '';
}

// amount is a value with its unit: "2,048 MiB", "1.5" (cpus are cores).
export function amount(name, v) {
  const u = unit(name);
  return u && v !== null && v !== undefined ? num(v) + ' ' + u : num(v);
}

// resourceNames orders resource names: cpus, mem, disk, then the others
// alphabetically.
const known = ['cpus', 'mem', 'disk'];

export function resourceNames(...maps) {
  const names = new Set();
  for (const m of maps) for (const k of Object.keys(m || {})) names.add(k);
  return [...names].sort((a, b) => {
    const ia = known.indexOf(a), ib = known.indexOf(b);
    if (ia >= 0 || ib >= 0) return (ia < 0 ? 99 : ia) - (ib < 0 ? 99 : ib);
    return a < b ? -1 : a > b ? 1 : 0;
  });
}

// resources writes a resource map on one line: "cpus 1.5 · mem 2,048 MiB",
// with no-break spaces inside each item so that a narrow cell wraps only
// between them. null (not known) is "—"; an empty map is "none".
export function resources(m) {
  if (m === null || m === undefined) return '—';
  const names = resourceNames(m);
  if (names.length === 0) return 'none';
  return names.map((n) => (n + ' ' + amount(n, m[n])).replace(/ /g, '\u00a0')).join(' · ');
}

// limit writes one task limit: a number, "∞" for "Infinity", "—" when the
// task set none.
export function limit(v) {
  if (v === undefined || v === null) return '—';
  if (v === 'Infinity') return '∞';
  return num(v);
}

// State classes colour task states by what they mean to an operator.
export function stateClass(state) {
  switch (state) {
    case 'TASK_RUNNING': return 'state running';
    case 'TASK_STAGING':
    case 'TASK_STARTING': return 'state starting';
    case 'TASK_FINISHED': return 'state finished';
    case 'TASK_KILLED': return 'state killed';
    case 'TASK_FAILED':
    case 'TASK_ERROR': return 'state failed';
    default: return 'state lost'; // LOST, DROPPED, UNREACHABLE, GONE
  }
}

export const taskStates = ['TASK_STAGING', 'TASK_STARTING', 'TASK_RUNNING', 'TASK_FINISHED', 'TASK_FAILED',
  'TASK_KILLED', 'TASK_ERROR', 'TASK_LOST', 'TASK_DROPPED', 'TASK_UNREACHABLE', 'TASK_GONE'];

export const activeStates = ['TASK_STAGING', 'TASK_STARTING', 'TASK_RUNNING'];

// time writes a timestamp in the browser's time zone, to the second:
// "2026-11-24 19:22:57". Invalid or missing input is "—".
export function time(value) {
  const d = value instanceof Date ? value : new Date(value);
  if (value === null || value === undefined || Number.isNaN(d.getTime())) return '—';
  const p = (n) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
}

// clock is the time of day only: "19:22:57".
export function clock(d) {
  return time(d).slice(11);
}

// duration writes a span of seconds coarsely: "45 s", "4 min 12 s", "2 h 5 min".
export function duration(seconds) {
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return s + ' s';
  if (s < 3600) return Math.floor(s / 60) + ' min ' + (s % 60) + ' s';
  return Math.floor(s / 3600) + ' h ' + Math.floor((s % 3600) / 60) + ' min';
}

// rate writes a per-second rate: "12.5/s"; null (not measured yet) is "—".
export function rate(v) {
  if (v === null || v === undefined || !Number.isFinite(v)) return '—';
  return new Intl.NumberFormat('en-US', { maximumFractionDigits: v < 10 ? 2 : 1 }).format(v) + '/s';
}
