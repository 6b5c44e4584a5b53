// Reading /metrics: the Prometheus text exposition format, version 0.0.4.
// Only samples matter here; # HELP and # TYPE lines are skipped.

// parse returns every sample as {name, labels, value}. A line it cannot read
// is skipped rather than failing the whole scrape (and counted in .skipped).
export function parse(text) {
  const samples = [];
  let skipped = 0;
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) continue;
    const s = parseLine(line);
    if (s) samples.push(s);
    else skipped++;
  }
  samples.skipped = skipped;
  return samples;
}

const namePattern = /^[a-zA-Z_:][a-zA-Z0-9_:]*/;
const labelNamePattern = /^[a-zA-Z_][a-zA-Z0-9_]*/;

function parseLine(line) {
  const m = namePattern.exec(line);
  if (!m) return null;
  const name = m[0];
  let i = name.length;
  const labels = {};
  if (line[i] === '{') {
    i++;
    for (;;) {
      while (line[i] === ' ' || line[i] === ',') i++;
      if (line[i] === '}') {
        i++;
        break;
      }
      const ln = labelNamePattern.exec(line.slice(i));
      if (!ln) return null;
      i += ln[0].length;
      while (line[i] === ' ') i++;
      if (line[i] !== '=') return null;
      i++;
      while (line[i] === ' ') i++;
      if (line[i] !== '"') return null;
      i++;
      let value = '';
      for (;;) {
        if (i >= line.length) return null;
        const c = line[i++];
        if (c === '"') break;
        if (c === '\\') {
          const e = line[i++];
          value += e === 'n' ? '\n' : e; // \\ → \, \" → ", \n → newline
        } else {
          value += c;
        }
      }
      labels[ln[0]] = value;
    }
  }
  const fields = line.slice(i).trim().split(/\s+/);
  if (fields.length < 1 || fields[0] === '') return null;
  const value = parseValue(fields[0]);
  if (value === null) return null;
  return { name, labels, value };
}

function parseValue(s) {
  switch (s) {
    case '+Inf': case 'Inf': return Infinity;
    case '-Inf': return -Infinity;
    case 'NaN': return NaN;
  }
  if (!/^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/.test(s)) return null;
  return Number(s);
}

// select returns the samples named name, optionally only those whose labels
// include every label of match.
export function select(samples, name, match = {}) {
  return samples.filter((s) => s.name === name && Object.entries(match).every(([k, v]) => s.labels[k] === v));
}

// value is the one sample named name matching match, or null.
export function value(samples, name, match = {}) {
  const found = select(samples, name, match);
  return found.length ? found[0].value : null;
}

// seriesKey names a sample by its metric and labels, for rates.
export function seriesKey(s) {
  const labels = Object.keys(s.labels).sort().map((k) => k + '=' + JSON.stringify(s.labels[k]));
  return s.name + '{' + labels.join(',') + '}';
}

// Rates turns successive scrapes of counters into per-second rates. A
// counter that went down was reset (the server restarted): its rate counts
// from zero.
export class Rates {
  constructor() {
    this.previous = null; // {at (ms), values: Map}
    this.rates = new Map();
    this.window = null; // seconds between the last two scrapes
  }

  // update takes a scrape made at time at (ms since the epoch).
  update(samples, at) {
    const values = new Map(samples.map((s) => [seriesKey(s), s.value]));
    if (this.previous && at > this.previous.at) {
      const seconds = (at - this.previous.at) / 1000;
      this.rates = new Map();
      for (const [key, v] of values) {
        if (!this.previous.values.has(key)) continue;
        const before = this.previous.values.get(key);
        const delta = v >= before ? v - before : v;
        this.rates.set(key, delta / seconds);
      }
      this.window = seconds;
    }
    this.previous = { at, values };
  }

  // rate is the per-second rate of the series of sample s, or null before
  // two scrapes saw it.
  rate(s) {
    const r = this.rates.get(seriesKey(s));
    return r === undefined ? null : r;
  }
}
