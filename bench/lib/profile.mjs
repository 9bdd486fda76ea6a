// Summarise a V8 .cpuprofile (node --cpu-prof): self time by function and by module.
import { readFileSync } from 'node:fs';

function moduleOf(url, root) {
  if (!url) return '(native/V8)';
  let u = url.replace(/^file:\/\//, '');
  if (u.startsWith('node:')) return u.split('/')[0].replace(/^node:internal.*/, 'node:internal');
  const nm = u.lastIndexOf('node_modules/');
  if (nm >= 0) {
    const rest = u.slice(nm + 'node_modules/'.length).split('/');
    return rest[0].startsWith('@') ? `${rest[0]}/${rest[1]}` : rest[0];
  }
  if (root && u.startsWith(root)) u = u.slice(root.length + 1);
  return u;
}

/** {totalMs, functions:[{name, where, selfMs, pct}], modules:[{module, selfMs, pct}]} */
export function summariseProfile(file, { root, top = 15, window } = {}) {
  const p = JSON.parse(readFileSync(file, 'utf8'));
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const self = new Map();
  // window: [fromEndMs, toEndMs] — only samples taken that long before the profile ended
  // (e.g. the measured step, not start-up and provisioning).
  let t = p.startTime;
  const stamps = p.timeDeltas.map((d) => (t += d));
  const lo = window ? p.endTime - window[0] * 1000 : -Infinity;
  const hi = window ? p.endTime - window[1] * 1000 : Infinity;
  for (let i = 0; i < p.samples.length; i++) {
    if (stamps[i] < lo || stamps[i] > hi) continue;
    const id = p.samples[i];
    const dt = p.timeDeltas[i] ?? 0;
    self.set(id, (self.get(id) ?? 0) + Math.max(0, dt));
  }
  const fn = new Map();
  const mod = new Map();
  let total = 0;
  let idle = 0;
  for (const [id, us] of self) {
    const n = byId.get(id);
    const cf = n.callFrame;
    const name = cf.functionName || '(anonymous)';
    if (name === '(idle)') {
      idle += us;
      continue;
    }
    total += us;
    const where = cf.url ? `${moduleOf(cf.url, root)}:${cf.lineNumber + 1}` : '';
    const key = `${name}\u0000${where}`;
    fn.set(key, (fn.get(key) ?? 0) + us);
    const m = name.startsWith('(') ? name : moduleOf(cf.url, root);
    mod.set(m, (mod.get(m) ?? 0) + us);
  }
  const pct = (us) => (100 * us) / Math.max(1, total);
  return {
    totalMs: total / 1000,
    idleMs: idle / 1000,
    functions: [...fn]
      .sort((a, b) => b[1] - a[1])
      .slice(0, top)
      .map(([k, us]) => {
        const [name, where] = k.split('\u0000');
        return { name, where, selfMs: us / 1000, pct: pct(us) };
      }),
    modules: [...mod]
      .sort((a, b) => b[1] - a[1])
      .slice(0, top)
      .map(([m, us]) => ({ module: m, selfMs: us / 1000, pct: pct(us) })),
  };
}
