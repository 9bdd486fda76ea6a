/**
 * Ledger throughput by Redis AOF fsync setting (docs/billing.md "Durability"):
 * 20 000 partner → customer transfers, 50 at a time, against a local redis-server
 * started per setting (appendonly off, appendfsync no, everysec, always).
 * Run: npx vite-node bench/ledger-fsync.ts  (needs /usr/bin/redis-server; ports 26390-26393)
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { RedisBillingStore } from '../src/store/billing/redis.ts';

async function run(fsync: string, port: number): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'ledger-bench-'));
  const child = spawn(process.env.REDIS_SERVER_BIN ?? '/usr/bin/redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', fsync === 'off' ? 'no' : 'yes', '--appendfsync', fsync === 'off' ? 'everysec' : fsync, '--dir', dir], { stdio: 'ignore' });
  await new Promise((r) => setTimeout(r, 400));
  const redis = new Redis({ port });
  const store = new RedisBillingStore(redis);
  const terms = { currency: 'USD', accountType: 'PREPAID' as const, creditLimit: 0 };
  await store.open('P', 'partner', terms, new Date().toISOString());
  for (let i = 0; i < 10; i++) await store.open('P', `MA${i}`, terms, new Date().toISOString());
  await store.post('P', { key: 'fund', currency: 'USD', at: new Date().toISOString(), postings: [{ id: 'f', account: 'partner', type: 'credit', amount: 1e12, referenceType: 'recharge', referenceId: 'f', description: '' }] });
  const N = 20000;
  const t0 = process.hrtime.bigint();
  let next = 0;
  await Promise.all(Array.from({ length: 50 }, async () => {
    while (next < N) {
      const i = next++;
      await store.post('P', { key: `t${i}`, currency: 'USD', at: new Date().toISOString(), postings: [
        { id: `d${i}`, account: 'partner', type: 'debit', amount: 100000, referenceType: 'transfer', referenceId: `t${i}`, description: 'bench' },
        { id: `c${i}`, account: `MA${i % 10}`, type: 'credit', amount: 100000, referenceType: 'transfer', referenceId: `t${i}`, description: 'bench' },
      ] });
    }
  }));
  const s = Number(process.hrtime.bigint() - t0) / 1e9;
  console.log(`appendfsync=${fsync}: ${N} transfers (2 rows each) in ${s.toFixed(2)} s = ${Math.round(N / s)} transfers/s`);
  redis.disconnect();
  child.kill('SIGTERM');
  await new Promise((r) => child.once('exit', r));
  rmSync(dir, { recursive: true, force: true });
}
for (const [i, f] of ['off', 'no', 'everysec', 'always'].entries()) await run(f, 26390 + i);
